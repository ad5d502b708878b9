package front

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"needle/testkit/testenv"
)

// HAProxy accepts the configuration as written.
func TestConfigIsValid(t *testing.T) {
	haproxy := testenv.HAProxy(t)
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	opt := Options{AddressDir: "/addr", Listen: "127.0.0.1:8000", ServerTimeout: 90 * time.Second}
	if err := os.WriteFile(cfg, Config(opt, []string{"10.77.0.1:8000", "10.77.0.2:8000"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

// replica is a fake needle serve: /ready answers, /retrieve names the replica after hang (a
// cut-off replica never answers: hang is long).
type replica struct {
	*httptest.Server
	name  string
	hang  atomic.Int64 // nanoseconds /retrieve waits before answering
	calls atomic.Int64
}

func newReplica(t *testing.T, dir, name string) *replica {
	r := &replica{name: name}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/ready" {
			io.WriteString(w, `{"status":"ready"}`)
			return
		}
		r.calls.Add(1)
		io.Copy(io.Discard, req.Body)
		select {
		case <-time.After(time.Duration(r.hang.Load())):
		case <-req.Context().Done():
			return
		}
		fmt.Fprintf(w, `{"result":%q}`, r.name)
	}))
	t.Cleanup(r.Close)
	addr := r.Listener.Addr().String()
	host, port, _ := net.SplitHostPort(addr)
	if err := os.WriteFile(filepath.Join(dir, "Host"+host+"_IP"+port+".txt"), []byte(addr), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startFront runs Run until the test ends.
func startFront(t *testing.T, dir string, serverTimeout time.Duration) string {
	opt := Options{AddressDir: dir, Listen: freeAddr(t), ServerTimeout: serverTimeout, HAProxy: testenv.HAProxy(t),
		Config: filepath.Join(t.TempDir(), "haproxy.cfg"), Log: io.Discard}
	stop := make(chan os.Signal, 1)
	opt.Stop = stop
	done := make(chan error, 1)
	go func() { done <- Run(opt) }()
	t.Cleanup(func() {
		stop <- os.Interrupt
		if err := <-done; err != nil {
			t.Errorf("front: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", opt.Listen); err == nil {
			c.Close()
			return "http://" + opt.Listen
		}
		if time.Now().After(deadline) {
			t.Fatal("HAProxy does not listen after 10 s")
		}
	}
}

// turn is a Search-R1 POST of 512 queries (about 40 KB: more than HAProxy's default buffer,
// which would leave it unretried): the replica that answered, or an error.
func turn(url string) (string, error) {
	queries := make([]string, 512)
	for i := range queries {
		queries[i] = fmt.Sprintf("what is the %d-th needle of the haystack", i)
	}
	body, _ := json.Marshal(map[string]any{"queries": queries, "topk": 3, "return_scores": true})
	resp, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct{ Result string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("status %d: %v", resp.StatusCode, err)
	}
	return out.Result, nil
}

// Through the front a POST never fails: not when its replica dies (refused: the retry goes to
// another) and not when its replica goes silent under it (after ServerTimeout, another); and
// a replica that appears in the folder gets requests (a reload).
func TestFrontRetriesAndFollowsTheFolder(t *testing.T) {
	dir := t.TempDir()
	a := newReplica(t, dir, "a")
	url := startFront(t, dir, time.Second)
	if got, err := turn(url); got != "a" || err != nil {
		t.Fatalf("first turn: %q, %v", got, err)
	}

	b := newReplica(t, dir, "b")
	for deadline := time.Now().Add(10 * time.Second); b.calls.Load() == 0; {
		if _, err := turn(url); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica that joined the folder got no request in 10 s")
		}
	}

	a.hang.Store(int64(time.Hour)) // silent: cut off while it searches
	began := time.Now()
	for range 4 {
		if got, err := turn(url); got != "b" || err != nil {
			t.Fatalf("a turn while a is silent: %q, %v", got, err)
		}
	}
	t.Logf("4 turns while a replica was silent: %v (server timeout 1s)", time.Since(began))

	a.hang.Store(0)
	b.Close() // killed
	for range 4 {
		if got, err := turn(url); got != "a" || err != nil {
			t.Fatalf("a turn after b was killed: %q, %v", got, err)
		}
	}
}
