// Package netcluster makes a cluster of hosts on this machine for tests and rehearsals of what
// crosses a network: one network namespace per host, each joined by a veth pair to a bridge
// in a switch namespace, each host's link shaped in both directions with tc's tbf (this
// kernel has tbf and htb but no netem: links have a rate, never a delay or a loss). Processes
// run inside a host with Host.Command; a link is cut (Host.Cut: the switch port leaves the
// bridge, the host keeps its carrier, as behind a dead switch port) and restored.
//
// Traffic stays inside: the namespaces have no link to the machine's own namespace and no
// route out; addresses are 10.77.0.0/24 inside each cluster (hosts .1, .2, ...; the switch,
// the hosts' gateway, .254). Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2.
//
// Cleanup: Close kills every process in the cluster's namespaces and deletes them. A process
// that made a cluster and died without Close (a test binary killed by its timeout) leaves
// namespaces named after its PID: the next New removes those of dead PIDs first.
package netcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"needle/testkit/testenv"
)

// Subnet is the hosts' subnet; Gateway the switch's address on it.
const (
	Subnet  = "10.77.0.0/24"
	Gateway = "10.77.0.254"
)

// prefix starts every namespace this package makes: "nc<pid>-<n>-<role>".
const prefix = "nc"

// Options shapes a cluster.
type Options struct {
	Hosts int
	// Rate is each host's link rate in tc's units ("1gbit", "500mbit"), both directions;
	// "" leaves links unshaped (veth speed: several Gbit/s per stream, CPU-bound).
	Rate string
}

// Cluster is a set of hosts on one switch. Methods are safe for concurrent use.
type Cluster struct {
	Hosts []*Host
	sw    string // the switch namespace
	rate  string

	mu     sync.Mutex
	closed bool
}

// Host is one namespace of the cluster.
type Host struct {
	Name string // h0, h1, ...
	NS   string // its network namespace
	IP   string // its address on the switch
	port string // its port on the bridge (a veth in the switch namespace)
	c    *Cluster
}

var seq atomic.Int64

// New makes a cluster. On error nothing of it is left behind.
func New(opt Options) (*Cluster, error) {
	if opt.Hosts < 1 || opt.Hosts > 250 {
		return nil, fmt.Errorf("netcluster: %d hosts, want 1-250", opt.Hosts)
	}
	if err := Supported(); err != nil {
		return nil, err
	}
	sweep()
	id := fmt.Sprintf("%s%d-%d-", prefix, os.Getpid(), seq.Add(1))
	c := &Cluster{sw: id + "sw", rate: opt.Rate}
	if err := c.build(id, opt.Hosts); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Supported says why this machine cannot make a cluster, or nil.
func Supported() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netcluster: iproute2's ip is not installed")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return errors.New("netcluster: iproute2's tc is not installed")
	}
	if os.Geteuid() != 0 {
		return errors.New("netcluster: network namespaces need root")
	}
	return nil
}

func (c *Cluster) build(id string, hosts int) error {
	if err := run("ip", "netns", "add", c.sw); err != nil {
		return err
	}
	if err := c.sh(c.sw, "ip link set lo up && ip link add br0 type bridge && ip addr add "+Gateway+"/24 dev br0 && ip link set br0 up"); err != nil {
		return err
	}
	for i := range hosts {
		h := &Host{Name: fmt.Sprintf("h%d", i), NS: fmt.Sprintf("%sh%d", id, i), IP: fmt.Sprintf("10.77.0.%d", i+1), port: fmt.Sprintf("p%d", i), c: c}
		if err := run("ip", "netns", "add", h.NS); err != nil {
			return err
		}
		c.Hosts = append(c.Hosts, h)
		if err := run("ip", "-n", c.sw, "link", "add", h.port, "type", "veth", "peer", "name", "eth0", "netns", h.NS); err != nil {
			return err
		}
		if err := c.sh(c.sw, fmt.Sprintf("ip link set %s master br0 && ip link set %s up", h.port, h.port)); err != nil {
			return err
		}
		if err := c.sh(h.NS, fmt.Sprintf("ip link set lo up && ip addr add %s/24 dev eth0 && ip link set eth0 up && ip route add default via %s", h.IP, Gateway)); err != nil {
			return err
		}
		if c.rate != "" {
			if err := h.SetRate(c.rate); err != nil {
				return err
			}
		}
	}
	return nil
}

// tbf's bucket: 256 KiB holds several 64 KiB GSO segments, so that the shaper passes
// segments whole and the payload reaches ~95% of the rate (957 Mbit/s of TCP payload at
// 1gbit measured here; 64 KiB gave 944); 20 ms of queue.
const tbfArgs = "burst 256kb latency 20ms"

// SetRate shapes the host's link to rate in both directions (its egress on eth0, and the
// switch port's egress towards it).
func (h *Host) SetRate(rate string) error {
	q := "tc qdisc replace dev %s root tbf rate " + rate + " " + tbfArgs
	if err := h.c.sh(h.NS, fmt.Sprintf(q, "eth0")); err != nil {
		return err
	}
	return h.c.sh(h.c.sw, fmt.Sprintf(q, h.port))
}

// Cut takes the host's link off the switch: nothing passes either way, and neither the host
// nor its peers are told (no carrier change, no reset): their connections go silent.
func (h *Host) Cut() error { return run("ip", "-n", h.c.sw, "link", "set", h.port, "nomaster") }

// Restore puts a cut link back on the switch.
func (h *Host) Restore() error {
	return run("ip", "-n", h.c.sw, "link", "set", h.port, "master", "br0")
}

// Sent is the bytes the host has sent on its link so far (tc's count at eth0's root qdisc).
func (h *Host) Sent() (int64, error) {
	out, err := exec.Command("tc", "-n", h.NS, "-s", "qdisc", "show", "dev", "eth0").Output()
	if err != nil {
		return 0, fmt.Errorf("tc in %s: %w", h.NS, err)
	}
	m := sentRe.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no byte count in tc's %q", out)
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

var sentRe = regexp.MustCompile(`Sent (\d+) bytes`)

// Addr is host:port of the host's address.
func (h *Host) Addr(port int) string { return h.IP + ":" + strconv.Itoa(port) }

// Command returns a command that runs name inside the host (ip netns exec execs it: the
// command's process is the program itself, so killing it kills the program).
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.NS, name}, args...)...)
}

// Close kills every process in the cluster and deletes its namespaces.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	names := []string{c.sw}
	for _, h := range c.Hosts {
		names = append(names, h.NS)
	}
	remove(names)
}

// remove kills the processes of namespaces and deletes them (their veths go with them).
func remove(names []string) {
	for _, ns := range names {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, ns := range names {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// sweep removes the namespaces of clusters whose making process is gone.
func sweep() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	var stale []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(f[0], prefix), "-", 2)[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		stale = append(stale, f[0])
	}
	remove(stale)
}

// sh runs a shell line inside namespace ns.
func (c *Cluster) sh(ns, line string) error { return run("ip", "netns", "exec", ns, "sh", "-c", line) }

func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("netcluster: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Listen listens on address inside the host (from this process: the socket is made in the
// host's namespace and stays there, whichever thread later uses it).
func (h *Host) Listen(network, address string) (net.Listener, error) {
	var ln net.Listener
	err := h.inside(func() (err error) {
		ln, err = net.Listen(network, address)
		return err
	})
	return ln, err
}

// Dial connects from inside the host to address (an IP literal: no resolver runs).
func (h *Host) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := h.inside(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// inside runs f on an OS thread switched into the host's namespace. The thread goes back to
// this process's namespace after; if it cannot, it stays locked and ends with its goroutine.
func (h *Host) inside(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open("/run/netns/" + h.NS)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netcluster: entering %s: %w", h.NS, err)
			return
		}
		err = f()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// ForTest makes a cluster closed when t ends. Where this machine cannot make one (not root,
// no iproute2) the test is skipped with the reason, or fails under NEEDLE_STRICT=1 (make test).
func ForTest(t testing.TB, opt Options) *Cluster {
	t.Helper()
	if err := Supported(); err != nil {
		testenv.Missing(t, err.Error())
	}
	c, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
