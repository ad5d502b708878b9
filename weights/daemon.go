// Package weights moves a model's weights from a trainer to rollout servers: it is the entry of
// `needle weights send|recv|publish`. The daemons (daemon.go): a sender (control socket for
// the trainer, TCP for receivers) or a receiver (optionally re-serving what it holds), each
// with an HTTP endpoint for /metrics and /status; their options and flags (options.go). They
// own the processes' listeners and their shutdown; the logic is in the parts: wire (the
// protocol and the one codec of weight deltas), store (what a node serves), feed (TCP), sender
// (the trainer's double buffer) and receiver (a crash-safe file). The same protocol at rest,
// `needle delta`, is package weights/deltafile.
package weights

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"needle/internal/prom"
	"needle/weights/feed"
	"needle/weights/receiver"
	"needle/weights/sender"
	"needle/weights/store"
)

// SendOptions configures the sender daemon; Specs (options.go) declares its flags and defaults.
type SendOptions struct {
	Sender sender.Options
	Listen string // TCP address receivers pull from
	HTTP   string // address of GET /metrics and /status; "" for none
	// Fanout is how many re-serving receivers pull from each one in the layout of those that
	// join (1: a chain; the sender always feeds one).
	Fanout int
	// Silence is how long a joined receiver may be silent before it leaves the layout.
	Silence time.Duration
	// Token is the secret receivers must prove (nil: read from TokenFile; neither: anyone
	// may pull).
	Token     []byte
	TokenFile string
}

// RunSender serves until ctx ends. ready (may be nil) gets the TCP and HTTP addresses once
// both listen (":0" picks a port: tests and the benchmark).
func RunSender(ctx context.Context, o SendOptions, ready func(tcp, http string)) error {
	if err := o.Specs().Check(); err != nil {
		return err
	}
	token, err := readToken(o.Token, o.TokenFile)
	if err != nil {
		return err
	}
	if o.Sender.Metrics == nil {
		o.Sender.Metrics = prom.NewRegistry()
	}
	s, err := sender.Open(o.Sender)
	if err != nil {
		return err
	}
	defer s.Close()
	ctl, err := s.ListenControl()
	if err != nil {
		return err
	}
	defer ctl.Close()
	srv := feed.New(s.Store, o.Sender.Metrics)
	srv.Log, srv.Token, srv.Layout, srv.Silence = o.Sender.Log, token, &feed.Layout{Fanout: o.Fanout}, o.Silence
	status := func() any {
		return struct {
			sender.Status
			Layout [][2]any `json:"layout"` // joined receivers, in join order: [name, route]
		}{s.Status(), srv.Layout.Routes()}
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	return serve(ctx, srv, ln, o.HTTP, token, o.Sender.Metrics, status, ready)
}

// RecvOptions configures the receiver daemon; Specs (options.go) declares its flags and
// defaults. Receiver.Token is also what a re-serving receiver's own clients must prove.
type RecvOptions struct {
	Receiver receiver.Options
	Serve    string // re-serve on this TCP address; "" does not re-serve
	Keep     int    // delta steps a re-serving receiver retains
	HTTP     string
	// NotifyURL (with NotifyBody) or NotifyCmd, split on spaces, tells the engine of each
	// version (receiver.NewNotifier) when Receiver.Notifier is nil.
	NotifyURL, NotifyBody, NotifyCmd string
	TokenFile                        string // holds Receiver.Token when that is nil
}

// RunReceiver keeps the file up to date until ctx ends; ready as for RunSender (tcp is ""
// when not re-serving).
func RunReceiver(ctx context.Context, o RecvOptions, ready func(tcp, http string)) error {
	if err := o.Check(); err != nil {
		return err
	}
	n, err := o.notifier()
	if err != nil {
		return err
	}
	o.Receiver.Notifier = n
	if o.Receiver.Token, err = readToken(o.Receiver.Token, o.TokenFile); err != nil {
		return err
	}
	if o.Receiver.Metrics == nil {
		o.Receiver.Metrics = prom.NewRegistry()
	}
	var srv *feed.Feed
	var ln net.Listener
	if o.Serve != "" {
		o.Receiver.Store = store.New(o.Keep, o.Receiver.Threads)
		srv = feed.New(o.Receiver.Store, o.Receiver.Metrics)
		srv.Log, srv.Token = o.Receiver.Log, o.Receiver.Token
		var err error
		if ln, err = net.Listen("tcp", o.Serve); err != nil {
			return err
		}
		o.Receiver.Serve = ln.Addr().String() // the port picked for ":0"; an unspecified host is filled in at the join
	}
	r, err := receiver.Open(o.Receiver)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	status := func() any {
		run, v := r.Version()
		return map[string]any{"out": o.Receiver.Out, "run": run, "version": v}
	}
	err = serve(ctx, srv, ln, o.HTTP, o.Receiver.Token, o.Receiver.Metrics, status, ready)
	cancel()
	if rerr := <-done; err == nil {
		err = rerr
	}
	return err
}

// serve runs srv on ln (srv nil: none) and the HTTP endpoint until ctx ends; with a token,
// the endpoint wants it as a bearer token (as `needle serve`'s /metrics does).
func serve(ctx context.Context, srv *feed.Feed, ln net.Listener, httpAddr string, token []byte, reg *prom.Registry, status func() any, ready func(tcp, http string)) error {
	var tcpAddr, hAddr string
	errs := make(chan error, 2)
	if srv != nil {
		tcpAddr = ln.Addr().String()
		go func() { errs <- srv.Serve(ln) }()
		defer srv.Close()
	}
	if httpAddr != "" {
		hln, err := net.Listen("tcp", httpAddr)
		if err != nil {
			return err
		}
		hAddr = hln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", reg)
		mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(status())
		})
		hs := &http.Server{Handler: bearer(token, mux), ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- hs.Serve(hln) }()
		defer hs.Close()
	}
	if ready != nil {
		ready(tcpAddr, hAddr)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return err
	}
}

// bearer lets through requests that carry "Authorization: Bearer <token>" (all when token is
// nil) and answers others 401.
func bearer(token []byte, h http.Handler) http.Handler {
	if token == nil {
		return h
	}
	want := append([]byte("Bearer "), token...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "this endpoint needs the weights token: Authorization: Bearer <the --token-file's token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
