package netcluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// echo serves one connection on ln, writing back what it reads.
func echo(ln net.Listener) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	io.Copy(c, c)
}

func roundTrip(c net.Conn, msg string, wait time.Duration) error {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return errors.New("echo answered " + string(got))
	}
	return nil
}

// A cut host is unreachable and its connections go silent, without an error; restored, the
// same connection goes on.
func TestCutAndRestore(t *testing.T) {
	c := ForTest(t, Options{Hosts: 3, Rate: "100mbit"})
	a, b := c.Hosts[0], c.Hosts[1]
	ln, err := b.Listen("tcp", b.Addr(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go echo(ln)
	conn, err := a.Dial(context.Background(), "tcp", b.Addr(9000))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := roundTrip(conn, "before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(conn, "during", 500*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a round trip across a cut link: %v, want a timeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := a.Dial(ctx, "tcp", b.Addr(9000)); err == nil {
		t.Fatal("dialed a cut host")
	}
	if err := b.Restore(); err != nil {
		t.Fatal(err)
	}
	// The unanswered "during" is retransmitted and echoed; then the connection carries on.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	got := make([]byte, len("during"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "during" {
		t.Fatalf("after the restore: %q, %v", got, err)
	}
	if err := roundTrip(conn, "after", 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A shaped link is no faster than its rate (a lower bound: the test cannot fail because the
// machine is slow).
func TestShaped(t *testing.T) {
	const rate = 20e6 / 8 // bytes/s of "20mbit"
	c := ForTest(t, Options{Hosts: 2, Rate: "20mbit"})
	a, b := c.Hosts[0], c.Hosts[1]
	ln, err := b.Listen("tcp", b.Addr(9001))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		n, _ := io.Copy(io.Discard, s)
		done <- n
	}()
	conn, err := a.Dial(context.Background(), "tcp", b.Addr(9001))
	if err != nil {
		t.Fatal(err)
	}
	const size = 2 << 20
	start := time.Now()
	if _, err := conn.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if n := <-done; n != size {
		t.Fatalf("received %d bytes, sent %d", n, size)
	}
	// Both buckets (the host's egress, the switch port's) may pass their burst at once.
	if floor := time.Duration(float64(size-2*256<<10) / rate * float64(time.Second)); time.Since(start) < floor {
		t.Fatalf("%d bytes at 20mbit took %s, the rate allows no less than %s", size, time.Since(start), floor)
	}
}

// A host sees only its own link: lo and eth0, and routes to the cluster's subnet.
func TestIsolated(t *testing.T) {
	c := ForTest(t, Options{Hosts: 1})
	h := c.Hosts[0]
	out, err := h.Command(context.Background(), "ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		names = append(names, strings.Fields(line)[1])
	}
	if len(names) != 2 || names[0] != "lo:" || !strings.HasPrefix(names[1], "eth0@") {
		t.Fatalf("links %q, want lo and eth0 only", names)
	}
	fwd, err := exec.Command("ip", "netns", "exec", c.sw, "cat", "/proc/sys/net/ipv4/ip_forward").Output()
	if err != nil || strings.TrimSpace(string(fwd)) != "0" {
		t.Fatalf("the switch forwards IP (%q, %v): traffic could leave the cluster", fwd, err)
	}
}

// A process that made a cluster and was killed leaves its namespaces; the next New removes
// them (and the processes inside).
func TestSweepsAfterKill(t *testing.T) {
	if os.Getenv("NETCLUSTER_CHILD") == "1" {
		c, err := New(Options{Hosts: 2})
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(c.sw + "\n")
		sleep := c.Hosts[0].Command(context.Background(), "sleep", "600")
		sleep.Start()
		time.Sleep(time.Hour) // killed by the parent
	}
	if err := Supported(); err != nil {
		t.Skip(err) // ForTest below reports it
	}
	child := exec.Command(os.Args[0], "-test.run=^TestSweepsAfterKill$")
	child.Env = append(os.Environ(), "NETCLUSTER_CHILD=1")
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// The child's first line names its switch; a child that made none ends, and so does the line.
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	sw := strings.TrimSpace(line)
	child.Process.Kill()
	child.Wait()
	if sw == "" {
		t.Fatal("the child made no cluster")
	}
	if !exists(t, sw) {
		t.Fatalf("%s vanished with its process: nothing to sweep", sw)
	}
	ForTest(t, Options{Hosts: 1})
	if exists(t, sw) {
		t.Fatalf("%s of a killed process is still there after New", sw)
	}
}

func exists(t *testing.T, ns string) bool {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == ns {
			return true
		}
	}
	return false
}
