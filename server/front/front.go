// Package front puts HAProxy in front of the replicas of an address folder, for the clients
// that call one fixed URL (Search-R1's requests.post with no timeout and no retry; verl's
// retrieval_service_url): HAProxy sends each request to a replica that passes its health
// checks and sends it again to another when a replica dies or goes silent under it
// (config.go). The replicas announce themselves in the folder (--save-address-to) and take out
// each other's files when one is gone (lifecycle's watch); the front writes HAProxy's
// configuration from the folder and reloads HAProxy when an address appears that it lacks.
// An address that leaves the folder stays until the next reload: HAProxy's checks have taken
// it out of rotation by then, and not reloading while replicas fail keeps HAProxy's view of
// them and its connections as they are.
package front

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"needle/internal/atomicfile"
	"needle/internal/writer"
	"needle/server/lifecycle"
)

// Options are the front's settings (needle front's flags).
type Options struct {
	AddressDir string // the replicas' --save-address-to folder
	Listen     string // host:port HAProxy binds
	// ServerTimeout is how long a replica may go without sending anything while it answers
	// (HAProxy's timeout server): past it the request goes to another replica. It bounds how
	// long a request caught on a replica cut off from the network waits, and must exceed the
	// slowest answer a healthy replica gives (a Search-R1 turn of 2,560 queries on the CPU).
	ServerTimeout time.Duration
	HAProxy       string    // the haproxy binary
	Config        string    // where the configuration is written
	Log           io.Writer // progress lines and HAProxy's own; nil: discarded
	// Stop delivers the signals that end the front (nil: SIGINT and SIGTERM): HAProxy then
	// stops taking connections and finishes the requests it holds.
	Stop <-chan os.Signal
}

// pollInterval is how often the folder is read.
const pollInterval = 250 * time.Millisecond

// Run writes the configuration, runs HAProxy in master-worker mode (-W: SIGUSR2 reloads it
// with no connection refused; -db: in the foreground, a child of this process) and reloads it
// when the folder holds an address its configuration lacks, until Stop or HAProxy's exit.
func Run(opt Options) error {
	log := writer.OrDiscard(opt.Log)
	stop := opt.Stop
	if stop == nil {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		stop = c
	}
	running, err := addresses(opt.AddressDir)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(opt.Config, Config(opt, running)); err != nil {
		return err
	}
	cmd := exec.Command(opt.HAProxy, "-W", "-db", "-f", opt.Config)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting HAProxy (Debian: apt-get install haproxy; or --haproxy PATH): %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(log, "needle front: HAProxy (pid %d) on %s in front of %d replicas of %s: %s; configuration %s\n",
		cmd.Process.Pid, opt.Listen, len(running), opt.AddressDir, strings.Join(running, " "), opt.Config)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("HAProxy exited: %v", err)
		case sig := <-stop:
			fmt.Fprintf(log, "needle front: %v: HAProxy stops taking connections and finishes the requests it holds\n", sig)
			cmd.Process.Signal(syscall.SIGUSR1)
			if err := <-exited; err != nil {
				return fmt.Errorf("HAProxy after SIGUSR1: %w", err)
			}
			return nil
		case <-tick.C:
		}
		now, err := addresses(opt.AddressDir)
		if err != nil || !slices.ContainsFunc(now, func(a string) bool { return !slices.Contains(running, a) }) {
			continue
		}
		if err := atomicfile.Write(opt.Config, Config(opt, now)); err != nil {
			return errors.Join(err, cmd.Process.Signal(syscall.SIGUSR1))
		}
		cmd.Process.Signal(syscall.SIGUSR2)
		running = now
		fmt.Fprintf(log, "needle front: reloaded HAProxy with %d replicas: %s\n", len(now), strings.Join(now, " "))
	}
}

// ConfigFor renders the configuration for the replicas the folder holds now.
func ConfigFor(opt Options) ([]byte, error) {
	addrs, err := addresses(opt.AddressDir)
	if err != nil {
		return nil, err
	}
	return Config(opt, addrs), nil
}

// addresses lists the folder's addresses, sorted, once each (files that do not hold a
// host:port are not ours to route to).
func addresses(dir string) ([]string, error) {
	files, err := lifecycle.Addresses(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range files {
		if _, _, err := net.SplitHostPort(a); err == nil && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}
