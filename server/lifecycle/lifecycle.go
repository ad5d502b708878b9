// Package lifecycle runs a needle server process from its socket to its exit: it listens (or
// takes the listening socket over from the needle serving there, Options.Replace: handover.go),
// answers GET /health and holds requests while the retriever loads, announces the address
// file ASearcher's clients pick servers from (address.go), and drains on SIGINT or SIGTERM or
// when a successor took over. The HTTP handlers are package server's, what they serve is
// package engine's; this package owns the order in which a process starts and stops.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"needle/engine"
	"needle/internal/option"
	"needle/internal/writer"
	"needle/server"
)

// Options are a serving process's lifecycle settings; Specs declares needle serve's flags of
// them and their defaults, and Run refuses what they do not take.
type Options struct {
	Host          string // address to bind
	Port          int    // TCP port (0: a free one)
	SaveAddressTo string // folder of the address file (""; none)
	Replace       bool   // take the socket over from the needle serving on Host:Port
	// WatchPeers watches the other replicas of the SaveAddressTo folder, every WatchInterval,
	// and removes the files of those that are gone (peers.go).
	WatchPeers    bool
	WatchInterval time.Duration
	// Witness is the host:port whose answer shows a replica that it is not the cut-off side of
	// a partition (WitnessGateway: the default route's gateway; "": none).
	Witness     string
	Drain       time.Duration // how long in-flight requests may finish at the end
	IndexName   string        // what is loading, for the log
	QueryPrefix string        // for the log's curl example
	Log         io.Writer     // progress lines (needle serve: stderr); nil: discarded
	// Stop delivers the signals that end the process (nil: SIGINT and SIGTERM); a second one
	// during the drain exits at once.
	Stop <-chan os.Signal
}

// Specs declares the options.
func (o *Options) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Host, "Host", "host", "127.0.0.1", "address to bind (0.0.0.0 exposes the server to the network)"),
		option.Num(&o.Port, "Port", "port", 8000, option.From(0), "TCP port (0 picks a free one; see --save-address-to)"),
		option.String(&o.SaveAddressTo, "SaveAddressTo", "save-address-to", "", "folder to write Host{ip}_IP{port}.txt = \"{ip}:{port}\" into (ASearcher's client reads it) as soon as the port listens; until ready, requests are held (--load-wait). Removed when the drain begins, before the port refuses connections, unless it is the folder's last address file (docs/lifecycle.md)"),
		option.Bool(&o.Replace, "Replace", "replace", false, "take over --host:--port from the needle serve running there: it keeps serving while this one loads, then drains and exits, and no connection is refused in between (docs/lifecycle.md); without a needle there, start as usual"),
		option.Num(&o.Drain, "Drain", "drain", 30*time.Second, option.Above(0), "on SIGINT/SIGTERM, how long in-flight requests may finish"),
		option.Bool(&o.WatchPeers, "WatchPeers", "watch-peers", true, "with --save-address-to: probe the other replicas of the folder (GET /health) and remove the files of those that are gone: at once when their\n"+
			"host refuses the connection (a killed process), after 8 x --watch-interval without an answer when this replica hears a majority of the folder or reaches\n"+
			"--watch-witness (the other side of a partition removes nothing); never its own file, never the folder's last (docs/serve.md)"),
		option.Num(&o.WatchInterval, "WatchInterval", "watch-interval", 250*time.Millisecond, option.Above(0), "with --watch-peers: time between probes of each replica; a probe gets 4x as long to answer, and a replica silent for 8x is taken for unreachable"),
		option.String(&o.Witness, "Witness", "watch-witness", WitnessGateway, "with --watch-peers: host:port whose answer to a TCP connect (accepted or refused) shows this replica is not the cut-off side of a partition;\n"+
			"\"gateway\": the default route's gateway, port 9; \"\": none (then only a majority of the folder's replicas decides); none either on a loopback --host"),
	}
}

// Check refuses the options their specs do not take, a port past 65535, and Replace of port 0.
func (o Options) Check() error {
	switch {
	case o.Port > 65535:
		return option.Errorf("Port", "%d, want <= 65535", o.Port)
	case o.Replace && o.Port == 0:
		return option.Errorf("Replace", "with port 0: give the port of the server to replace")
	}
	return o.Specs().Check()
}

// Run serves srv with the retriever open returns, from the socket to the end of the drain,
// and returns why it stopped (nil after a drain that completed). srv is ready (SetRetriever)
// once open returns.
func Run(opt Options, srv *server.Server, open func() (*engine.Retriever, error)) error {
	if err := opt.Check(); err != nil {
		return err
	}
	out := &writer.Locked{W: writer.OrDiscard(opt.Log)} // the handover's goroutines log too
	log := func(format string, a ...any) { fmt.Fprintf(out, "needle serve: "+format+"\n", a...) }
	stop := opt.Stop
	if stop == nil {
		c := make(chan os.Signal, 2)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		stop = c
	}
	ln, handed, err := listen(opt, log)
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	serve := func() { go func() { served <- srv.Serve(ln) }() }
	addr := ln.Addr().(*net.TCPAddr)
	began := time.Now()
	var h *handover
	var address *addressFile
	var watch *watcher
	// withdraw takes the address file back (see address.go) while the port still accepts
	// connections: it runs before every srv.Shutdown (which closes the listener). Once: the
	// second signal's goroutine and the main path may both reach it. The watch of the peers
	// stops first: it could write the file again.
	withdraw := sync.OnceValue(func() error {
		if watch != nil {
			watch.close()
		}
		if address == nil {
			return nil
		}
		what, err := address.withdraw()
		if err == nil {
			log("%s", what)
		}
		return err
	})
	shutdown := func() error { return errors.Join(withdraw(), srv.Shutdown(context.Background())) }
	// The replaced needle serves until this one is ready; a new one serves (/health; held
	// requests) while it loads, with its address file already written.
	if handed != nil {
		log("replacing pid %d on %s: it serves until this one is ready (loading %s)", handed.pid, addr, opt.IndexName)
	} else {
		serve()
		log("listening on %s (GET /health answers; loading %s)", addr, opt.IndexName)
		if address, err = announce(opt, addr, log); err != nil {
			return errors.Join(err, shutdown())
		}
		watch = startWatch(opt, address, log)
		h = handoverFor(opt, ln, log)
	}
	type opened struct {
		r   *engine.Retriever
		err error
	}
	openDone := make(chan opened, 1)
	go func() {
		r, err := open()
		openDone <- opened{r, err}
	}()
	var r *engine.Retriever
	select {
	case res := <-openDone:
		if res.err != nil {
			return errors.Join(res.err, shutdown())
		}
		r = res.r
	case sig := <-stop:
		return errors.Join(fmt.Errorf("%v while loading: stopped before ready", sig), shutdown())
	}
	srv.SetRetriever(r)
	if handed != nil {
		serve()
		if address, err = announce(opt, addr, log); err != nil {
			return errors.Join(err, shutdown())
		}
		watch = startWatch(opt, address, log)
		if err := handed.ready(); err != nil { // it exited meanwhile: the socket is this process's alone
			log("telling pid %d to drain: %v", handed.pid, err)
		}
		h = serveHandover(ln.(*net.TCPListener), handed.ctl, log)
	}
	var replaced <-chan int
	if h != nil {
		h.ready.Store(true)
		replaced = h.replaced
	}
	log("ready in %.1fs: %d vectors (%s, %s index), query prefix %q\n"+
		"  curl -s http://%s/retrieve -H 'Content-Type: application/json' -d '{\"queries\":[\"what is a needle\"],\"topk\":3,\"return_scores\":true}'",
		time.Since(began).Seconds(), r.Ntotal(), opt.IndexName, r.IndexBackend(), opt.QueryPrefix, net.JoinHostPort(advertisedIP(opt.Host), strconv.Itoa(addr.Port)))

	select {
	case err := <-served:
		return errors.Join(fmt.Errorf("HTTP server stopped: %w", err), withdraw())
	case sig := <-stop:
		log("%v: draining in-flight requests (up to %v; a second SIGINT or SIGTERM exits at once)", sig, opt.Drain)
	case pid := <-replaced:
		log("pid %d serves on %s now: draining in-flight requests (up to %v; SIGINT or SIGTERM exits at once)", pid, addr, opt.Drain)
	}
	if h != nil {
		h.close()
	}
	go func() {
		sig := <-stop
		log("second %v: exiting without waiting for in-flight requests", sig)
		if err := withdraw(); err != nil {
			log("%v", err)
		}
		os.Exit(1)
	}()
	withdrawErr := withdraw() // before the listener closes: clients that pick the file now find the port open
	ctx, cancel := context.WithTimeout(context.Background(), opt.Drain)
	defer cancel()
	shutdownErr := srv.Shutdown(ctx)
	if shutdownErr == nil {
		// Only once no handler can call the engine any more; after a drain timeout the
		// process exits and the OS releases everything.
		r.Close()
	}
	return errors.Join(withdrawErr, shutdownErr)
}

// listen binds Host:Port, or with Replace takes the listening socket of the needle serving
// there (handed, nil when none answers: then it binds).
func listen(opt Options, log func(string, ...any)) (net.Listener, *takeover, error) {
	if opt.Replace {
		addr, err := serveAddr(opt.Host, opt.Port)
		if err != nil {
			return nil, nil, err
		}
		handed, err := takeOver(addr)
		if err != nil {
			return nil, nil, err
		}
		if handed != nil {
			return handed.tcp, handed, nil
		}
		log("no needle serves %s to take over from; starting as the first", addr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opt.Host, strconv.Itoa(opt.Port)))
	return ln, nil, err
}

// serveAddr is the TCP address host and port name.
func serveAddr(host string, port int) (*net.TCPAddr, error) {
	return net.ResolveTCPAddr("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}

// handoverFor answers the take-over requests of a successor (Options.Replace) for the socket ln
// this process bound (nil, with a log line, when its control socket cannot be opened: the
// server runs without).
func handoverFor(opt Options, ln net.Listener, log func(string, ...any)) *handover {
	addr, err := serveAddr(opt.Host, ln.Addr().(*net.TCPAddr).Port)
	var ctl *net.UnixListener
	if err == nil {
		ctl, err = listenControl(addr)
	}
	if err != nil {
		log("a successor cannot take over from this server (no control socket): %v", err)
		return nil
	}
	return serveHandover(ln.(*net.TCPListener), ctl, log)
}

// announce checks that the server answers GET /health through its socket, then writes the
// address file if SaveAddressTo is set (nil without).
func announce(opt Options, addr *net.TCPAddr, log func(string, ...any)) (*addressFile, error) {
	host := advertisedIP(opt.Host)
	hostPort := net.JoinHostPort(host, strconv.Itoa(addr.Port))
	probe := net.JoinHostPort(opt.Host, strconv.Itoa(addr.Port))
	if wildcard(opt.Host) {
		probe = net.JoinHostPort("127.0.0.1", strconv.Itoa(addr.Port))
	}
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + probe + "/health")
	if err != nil {
		return nil, fmt.Errorf("self-check GET /health: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("self-check GET /health: status %d", resp.StatusCode)
	}
	if opt.SaveAddressTo == "" {
		return nil, nil
	}
	a, done, err := writeAddress(opt.SaveAddressTo, hostPort, host, addr.Port)
	for _, d := range done {
		log("%s", d)
	}
	return a, err
}

// startWatch starts the watch of the other replicas of the address folder (peers.go), or
// returns nil when there is no folder or no watch.
func startWatch(opt Options, address *addressFile, log func(string, ...any)) *watcher {
	if address == nil || !opt.WatchPeers {
		return nil
	}
	witness, why := witnessFor(opt.Witness, advertisedIP(opt.Host))
	if witness == "" {
		log("watching the other replicas of %s every %v; no witness (%s): an unreachable peer's file is removed only by a majority of the folder's replicas",
			opt.SaveAddressTo, opt.WatchInterval, why)
	} else {
		log("watching the other replicas of %s every %v; witness %s", opt.SaveAddressTo, opt.WatchInterval, witness)
	}
	return watchPeers(address, opt.WatchInterval, witness, log)
}

// advertisedIP is the address clients should dial: the bind address, or for a wildcard
// bind the machine's first non-loopback IPv4 address (the anchors use their host's IP).
func advertisedIP(host string) string {
	if !wildcard(host) {
		return host
	}
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// wildcard reports whether host binds every interface.
func wildcard(host string) bool { return host == "0.0.0.0" || host == "::" || host == "" }
