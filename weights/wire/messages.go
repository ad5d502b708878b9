package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// A connection is a sequence of exchanges, each opened by the client's Hello:
//
//	client: Hello
//	server: Manifest                           (Hello.Manifest set)
//	server: Plan, then for each of its steps:  (otherwise; Wait holds the Plan back)
//	          Step, Record..., End
//	server: Error                              (instead of any of the above; ends the exchange)
//
// after which the client may send the next Hello on the same connection. While the server has
// nothing to send (a held Plan, a step's next record not yet produced or relayed) it sends a
// Beat every BeatEvery, so that a client can tell a quiet upstream from a lost one by silence.
//
// A membership connection (to a sender) is opened by a Join instead:
//
//	client: Join, then a Beat every BeatEvery
//	server: Route (at once, and again whenever the client's route changes), Beats between
//
// A server with a token (auth.go) expects the token handshake before either.

// BeatEvery is how often a peer with nothing else to send says it is still there.
const BeatEvery = 250 * time.Millisecond

// DefaultSilence is how long a peer may send nothing before it counts as lost (its process
// killed, its host cut off): four beats.
const DefaultSilence = 4 * BeatEvery

// Join asks a sender for a place in its layout: which upstreams to pull from (Route). A
// receiver that re-serves gives the address others reach it at; a receiver that does not is a
// leaf of the layout.
type Join struct {
	Node  string `json:"node"`            // who joins, for the logs
	Serve string `json:"serve,omitempty"` // host:port this receiver re-serves on; "" for none
}

// Route is where a member pulls from: re-serving receivers, nearest first (its parent in the
// layout, then the parent's parent, ...). Empty: the sender itself. The member falls back to
// the sender it joined after them.
type Route struct {
	Upstreams []string `json:"upstreams"`
}

// Hello asks for the newest version the server can give, or for a manifest.
type Hello struct {
	Node     string  `json:"node,omitempty"`     // who asks, for the server's logs
	Run      string  `json:"run,omitempty"`      // run of the version the client holds
	Have     uint64  `json:"have,omitempty"`     // version the client holds and has verified; 0 = none
	Wait     bool    `json:"wait,omitempty"`     // hold the Plan until a version newer than Have can be served
	Full     bool    `json:"full,omitempty"`     // the newest version in full, not as a delta (a resync)
	Resume   *Resume `json:"resume,omitempty"`   // continue an interrupted step
	Manifest uint64  `json:"manifest,omitempty"` // answer with this version's Manifest only
}

// Resume names the step a client was receiving when its transfer broke, and how many of
// its records it holds: the server continues it when its plan would start with that step.
type Resume struct {
	Run    string `json:"run"`
	From   uint64 `json:"from"` // 0 for a full step
	To     uint64 `json:"to"`
	Record int    `json:"record"` // records of the step already received
}

// Plan is what the server will send: steps that lead from the client's version (or from
// nothing, a full step) to Target. No steps: the client is up to date.
type Plan struct {
	Run     string     `json:"run"`
	Target  uint64     `json:"target"`
	Steps   []StepInfo `json:"steps"`
	Resumed bool       `json:"resumed,omitempty"` // the first step continues Hello.Resume
}

// StepInfo is one step of a plan: the delta From -> To, or version To in full (From 0).
type StepInfo struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// Full reports whether the step sends version To whole.
func (s StepInfo) Full() bool { return s.From == 0 }

// Step opens one step: version To's chunk map and where its records start.
type Step struct {
	StepInfo
	Size   int64  `json:"size"`   // bytes of version To's file
	Chunk  int64  `json:"chunk"`  // bytes of a record's chunk (the last one of a tensor may be shorter)
	Header []byte `json:"header"` // version To's safetensors header: 8-byte length and JSON
	First  int    `json:"first"`  // index of the first record that follows (resumed steps skip some)
}

// End closes a step.
type End struct {
	Records  int      `json:"records"`            // records in the whole step
	Manifest []uint64 `json:"manifest,omitempty"` // of version To, when the server has it
}

// Manifest is a version's identity: its chunk map and the xxh64 of each chunk, in record order.
// A client compares its own file with it before trusting that file as a delta base.
type Manifest struct {
	Run     string   `json:"run"`
	Version uint64   `json:"version"`
	Size    int64    `json:"size"`
	Chunk   int64    `json:"chunk"`
	Header  []byte   `json:"header"`
	Hashes  []uint64 `json:"hashes"`
}

// Error ends an exchange. Code is one of the Code* constants.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

const (
	CodeBadRequest = "bad-request" // the Hello is invalid: do not repeat it
	CodeGone       = "gone"        // what the exchange served went away (a newer version overwrote it): ask again
	CodeNotFound   = "not-found"   // the asked manifest is not known here
	CodeInternal   = "internal"    // the server failed: ask again later
	CodeAuth       = "auth"        // the token handshake failed (a wrong or missing token): not retried as is
)

func (e *Error) Error() string { return fmt.Sprintf("server: %s: %s", e.Code, e.Message) }

// Marshal encodes a message as a frame payload.
func Marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only for types JSON cannot encode, which these are not
		panic(err)
	}
	return b
}

// Unmarshal decodes the payload of a frame of kind got into v, expecting kind want; a
// KindError payload is returned as *Error.
func Unmarshal(got, want Kind, payload []byte, v any) error {
	if got == KindError && want != KindError {
		var e Error
		if err := json.Unmarshal(payload, &e); err != nil {
			return fmt.Errorf("error frame: %w", err)
		}
		return &e
	}
	if got != want {
		return fmt.Errorf("got a %s frame, want %s", got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s frame: %w", want, err)
	}
	return nil
}

// Check validates a Hello's fields against each other.
func (h *Hello) Check() error {
	switch {
	case h.Manifest != 0 && (h.Wait || h.Resume != nil || h.Full):
		return fmt.Errorf("a manifest request asks for nothing else")
	case h.Resume != nil && (h.Resume.Record < 0 || h.Resume.To == 0 || h.Resume.From >= h.Resume.To):
		return fmt.Errorf("resume of step %d -> %d at record %d is not a step", h.Resume.From, h.Resume.To, h.Resume.Record)
	case h.Have != 0 && h.Run == "":
		return fmt.Errorf("have %d names no run", h.Have)
	}
	return nil
}
