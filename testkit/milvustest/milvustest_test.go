package milvustest

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestFillTemplate(t *testing.T) {
	got, err := fillTemplate([]byte("a: {{ x(int): 1 }}\nb: {{ y: info }} # c\nc: {{z}}\n"), map[string]string{"x": "7", "z": "/d"})
	if err != nil || string(got) != "a: 7\nb: info # c\nc: /d\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := fillTemplate([]byte("d: {{ dir }}"), nil); err == nil || !strings.Contains(err.Error(), "dir") {
		t.Fatalf("a slot without value or default: err %v", err)
	}
}

// TestStartKillRestart runs two servers side by side (own ports, etcd and pid file), kills
// one and restarts it on its folder.
func TestStartKillRestart(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr {
		t.Fatalf("two servers on %s", a.Addr)
	}
	dial := func(addr string) error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	a.Kill()
	if err := dial(a.Addr); err == nil {
		t.Fatalf("%s still answers after Kill", a.Addr)
	}
	if err := dial(b.Addr); err != nil {
		t.Fatalf("the other server: %v", err)
	}
	a.Restart(t)
	if err := dial(a.Addr); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
}

// TestFreePortsBelowEphemeral: the ports a server gets are distinct and none can be taken by an
// outgoing connection (the kernel's ephemeral range starts above them).
func TestFreePortsBelowEphemeral(t *testing.T) {
	ports, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p >= ephemeralLow() || p < 1024 || seen[p] {
			t.Fatalf("port %d of %v: want distinct ports in [1024, %d)", p, ports, ephemeralLow())
		}
		seen[p] = true
	}
}
