package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"needle/server/front"
)

func init() {
	register(command{name: "front", summary: "HAProxy in front of the replicas of an address folder, for clients with one fixed URL (Search-R1)", run: runFront})
}

func runFront(args []string) error {
	o := front.Options{Log: os.Stderr}
	fs := newFlagSet("front", "--address-dir DIR --listen HOST:PORT [flags]\n\n"+
		"Runs HAProxy (Debian's haproxy) on --listen in front of the needle serve replicas that write their\n"+
		"address into DIR (--save-address-to DIR): each request goes to a replica that passes its health\n"+
		"checks (GET /ready), and again to another when its replica dies or goes silent under it, so that a\n"+
		"client with one URL and no retry (Search-R1) sees no failure. The configuration is written from\n"+
		"the folder and HAProxy is reloaded when a new address appears there (docs/serve.md).")
	fs.StringVar(&o.AddressDir, "address-dir", "", "the folder the replicas write their address files into (their --save-address-to) (required)")
	fs.StringVar(&o.Listen, "listen", "", "host:port the front listens on: the URL clients call (required)")
	fs.DurationVar(&o.ServerTimeout, "server-timeout", time.Minute, "how long a replica may take to start its answer before the request goes to another replica (HAProxy's timeout server):\n"+
		"it bounds the wait of a request caught on a replica cut off from the network, and must exceed the slowest answer of a healthy one")
	fs.StringVar(&o.HAProxy, "haproxy", "haproxy", "the HAProxy binary (2.6 or newer)")
	fs.StringVar(&o.Config, "config", "", "where to write HAProxy's configuration (default: needle-front-HOST_PORT.cfg in the temporary folder)")
	printOnly := fs.Bool("print-config", false, "print the configuration for the folder's replicas now and exit, for an HAProxy run by other means")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	if o.AddressDir == "" || o.Listen == "" {
		return errors.New("--address-dir and --listen are required")
	}
	if o.ServerTimeout <= 0 {
		return fmt.Errorf("--server-timeout must be > 0, got %v", o.ServerTimeout)
	}
	if *printOnly {
		cfg, err := front.ConfigFor(o)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(cfg)
		return err
	}
	if o.Config == "" {
		o.Config = filepath.Join(os.TempDir(), "needle-front-"+filepath.Base(filepath.Clean(o.Listen))+".cfg")
	}
	return front.Run(o)
}
