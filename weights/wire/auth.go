package wire

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// The token handshake: peers that share a secret token prove it to each other before any
// other frame, each with an HMAC-SHA256 of both sides' fresh nonces (the token never crosses
// the wire, and a recorded handshake proves nothing later):
//
//	client: Auth{Nonce: cn}
//	server: Auth{Nonce: sn, Proof: HMAC(token, "server", cn, sn)}   (checked by the client)
//	client: Auth{Proof: HMAC(token, "client", cn, sn)}             (checked by the server)
//
// then the exchanges of messages.go. A server that wants a token answers any other first frame
// with an Error of CodeAuth, and so does a server that has none to an Auth: a client with a
// token pulls only from servers that prove the same token, so a stranger can neither read a
// version nor feed one. Frames are not encrypted, and after the handshake they carry checks,
// not MACs: someone who can rewrite packets on the path can still change them (use a tunnel
// there).

// Auth is one message of the token handshake.
type Auth struct {
	Nonce []byte `json:"nonce,omitempty"`
	Proof []byte `json:"proof,omitempty"`
}

// ErrAuth is wrapped by every handshake failure: a wrong or missing token on either side.
var ErrAuth = errors.New("token check failed")

func nonce() []byte {
	b := make([]byte, 16)
	rand.Read(b)
	return b
}

func proof(token []byte, role string, cn, sn []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(role))
	m.Write(cn)
	m.Write(sn)
	return m.Sum(nil)
}

// ClientHandshake proves token to the server behind w and r, and checks the server's proof.
func ClientHandshake(w io.Writer, r *bufio.Reader, token []byte) error {
	cn := nonce()
	if err := WriteFrame(w, KindAuth, Marshal(Auth{Nonce: cn})); err != nil {
		return err
	}
	k, p, _, err := ReadFrame(r, nil)
	if err != nil {
		return err
	}
	var s Auth
	if err := Unmarshal(k, KindAuth, p, &s); err != nil {
		var e *Error
		if errors.As(err, &e) && e.Code == CodeAuth {
			return fmt.Errorf("%w: %v", ErrAuth, e)
		}
		return err
	}
	if len(s.Nonce) != len(cn) || !hmac.Equal(s.Proof, proof(token, "server", cn, s.Nonce)) {
		return fmt.Errorf("%w: the server's proof does not match this token (it has another one)", ErrAuth)
	}
	return WriteFrame(w, KindAuth, Marshal(Auth{Proof: proof(token, "client", cn, s.Nonce)}))
}

// ServerHandshake answers a client whose first frame was first (its kind and payload): with
// token, that frame must be the client's Auth and the client must prove token; without one,
// an Auth is refused. A failure is answered with an Error of CodeAuth and returned wrapping
// ErrAuth; nil means the client may go on (with a token: its next frame is its first request).
func ServerHandshake(w io.Writer, r *bufio.Reader, token []byte, first Kind, payload []byte) error {
	refuse := func(msg string) error {
		WriteFrame(w, KindError, Marshal(Error{Code: CodeAuth, Message: msg}))
		return fmt.Errorf("%w: %s", ErrAuth, msg)
	}
	switch {
	case token == nil && first == KindAuth:
		return refuse("this server has no token: it serves anyone, and a client with a token trusts only servers that prove theirs")
	case token == nil:
		return nil
	case first != KindAuth:
		return refuse("this server needs a token (--token-file); the client sent none")
	}
	var c Auth
	if err := Unmarshal(first, KindAuth, payload, &c); err != nil || len(c.Nonce) == 0 {
		return refuse(fmt.Sprintf("a handshake without a nonce (%v)", err))
	}
	sn := nonce()
	if err := WriteFrame(w, KindAuth, Marshal(Auth{Nonce: sn, Proof: proof(token, "server", c.Nonce, sn)})); err != nil {
		return err
	}
	k, p, _, err := ReadFrame(r, nil)
	if err != nil {
		return err
	}
	var fin Auth
	if err := Unmarshal(k, KindAuth, p, &fin); err != nil {
		return refuse(err.Error())
	}
	if !hmac.Equal(fin.Proof, proof(token, "client", c.Nonce, sn)) {
		return refuse("the client's proof does not match this server's token (it has another one)")
	}
	return nil
}
