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
}

// RunSender serves until ctx ends. ready (may be nil) gets the TCP and HTTP addresses once
// both listen (":0" picks a port: tests and the benchmark).
func RunSender(ctx context.Context, o SendOptions, ready func(tcp, http string)) error {
	if err := o.Specs().Check(); err != nil {
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
	srv.Log = o.Sender.Log
	status := func() any { return s.Status() }
	return serve(ctx, srv, o.Listen, o.HTTP, o.Sender.Metrics, status, ready)
}

// RecvOptions configures the receiver daemon; Specs (options.go) declares its flags and
// defaults.
type RecvOptions struct {
	Receiver receiver.Options
	Serve    string // re-serve on this TCP address; "" does not re-serve
	Keep     int    // delta steps a re-serving receiver retains
	HTTP     string
	// NotifyURL (with NotifyBody) or NotifyCmd, split on spaces, tells the engine of each
	// version (receiver.NewNotifier) when Receiver.Notifier is nil.
	NotifyURL, NotifyBody, NotifyCmd string
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
	if o.Receiver.Metrics == nil {
		o.Receiver.Metrics = prom.NewRegistry()
	}
	var srv *feed.Feed
	if o.Serve != "" {
		o.Receiver.Store = store.New(o.Keep, o.Receiver.Threads)
		srv = feed.New(o.Receiver.Store, o.Receiver.Metrics)
		srv.Log = o.Receiver.Log
	}
	r, err := receiver.Open(o.Receiver)
	if err != nil {
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
	err = serve(ctx, srv, o.Serve, o.HTTP, o.Receiver.Metrics, status, ready)
	cancel()
	if rerr := <-done; err == nil {
		err = rerr
	}
	return err
}

// serve runs srv on tcp (srv nil: none) and the HTTP endpoint until ctx ends.
func serve(ctx context.Context, srv *feed.Feed, tcp, httpAddr string, reg *prom.Registry, status func() any, ready func(tcp, http string)) error {
	var tcpAddr, hAddr string
	errs := make(chan error, 2)
	if srv != nil {
		ln, err := net.Listen("tcp", tcp)
		if err != nil {
			return err
		}
		tcpAddr = ln.Addr().String()
		go func() { errs <- srv.Serve(ln) }()
		defer srv.Close()
	}
	if httpAddr != "" {
		ln, err := net.Listen("tcp", httpAddr)
		if err != nil {
			return err
		}
		hAddr = ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", reg)
		mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(status())
		})
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errs <- hs.Serve(ln) }()
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
