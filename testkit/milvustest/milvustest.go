// Package milvustest runs a real Milvus standalone server for tests: the binary that `make
// setup` unpacks from PyPI milvus==2.3.5 (Milvus Lite: embedded etcd, RocksMQ, local storage)
// into $NEEDLE_CACHE/milvus-2.3.5. Each Server has its own data folder and free ports, with the
// gRPC proxy dialed on 127.0.0.1. Start gives a test a server of its own, stopped when the test
// ends; Shared gives the tests of a package one server (each test using collections of its own
// names), which their TestMain stops with StopShared: a Milvus start costs seconds of both cores.
//
// How the server is launched, as PyPI milvus's own launcher does: config.yaml.template with
// its {{ name(type): default }} slots filled is written to DIR/configs/milvus.yaml, the
// binary runs `milvus run standalone` with DIR as working directory (Milvus reads
// ./configs/milvus.yaml), DEPLOY_MODE=STANDALONE, METRICS_PORT (the /healthz port) and
// LD_LIBRARY_PATH at its bundled libraries. Two things the launcher leaves fixed are set
// here so servers can run side by side: the embedded etcd's own listen ports (2379/2380
// unless ETCD_CONFIG_PATH names an etcd config) and the pid file (/run/milvus/standalone.pid
// unless `-alias` names another).
package milvustest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"needle/testkit/testenv"
)

// Version is the Milvus release `make setup` installs (tools/setup.sh).
const Version = "2.3.5"

// startTimeout bounds the wait for /healthz (a few seconds on an idle machine).
const startTimeout = 3 * time.Minute

// Server is one running (or stopped) Milvus standalone. Not safe for concurrent use.
type Server struct {
	Addr string // the gRPC proxy, "127.0.0.1:port": what needle's --milvus takes

	home    string // the unpacked release (bin/, config.yaml.template, glog.conf)
	dir     string // data, configs and logs of this server
	alias   string
	metrics int // the /healthz port
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	healthy bool          // it was healthy once: its ports are known to its data and tests
}

var serial atomic.Int64

// Start launches a server in a new temp folder and waits until it is healthy; it is killed
// when t ends. A missing installation skips t (fails it under NEEDLE_STRICT=1).
func Start(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, t.TempDir())
	t.Cleanup(func() {
		s.end()
		if t.Failed() {
			t.Logf("milvustest: last lines of %s:\n%s", s.logPath(), tail(s.logPath(), 30))
		}
	})
	s.Restart(t)
	return s
}

var shared struct {
	sync.Mutex
	s *Server
}

// Shared returns the package's shared server, started by the first call, and started again when
// an earlier test killed it without restarting it. Its folder outlives the tests until
// StopShared. A missing installation skips t (fails it under NEEDLE_STRICT=1).
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.s == nil {
		dir, err := os.MkdirTemp("", "milvustest")
		if err != nil {
			t.Fatalf("milvustest: %v", err)
		}
		shared.s = newServer(t, dir)
	}
	if shared.s.cmd == nil {
		shared.s.Restart(t)
	}
	return shared.s
}

// StopShared kills the shared server, if one was started, and removes its folder: for TestMain,
// after the tests ran.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.s != nil {
		shared.s.end()
		os.RemoveAll(shared.s.dir)
		shared.s = nil
	}
}

// newServer configures a server in dir (not started). A missing installation skips t.
func newServer(t testing.TB, dir string) *Server {
	t.Helper()
	home := filepath.Join(testenv.Cache(), "milvus-"+Version)
	if _, err := os.Stat(filepath.Join(home, "bin", "milvus")); err != nil {
		testenv.Missing(t, "Milvus server "+home)
	}
	s := &Server{home: home, dir: dir, alias: fmt.Sprintf("needle-test-%d-%d", os.Getpid(), serial.Add(1))}
	if err := s.configure(); err != nil {
		t.Fatalf("milvustest: %v", err)
	}
	return s
}

// end kills the server and removes its pid file.
func (s *Server) end() {
	s.Kill()
	for _, run := range []string{"/run/milvus", "/tmp/milvus"} { // Milvus's run folder, else its fallback
		os.Remove(filepath.Join(run, "standalone-"+s.alias+".pid"))
	}
}

// configure picks free ports and writes the server's configs into s.dir.
func (s *Server) configure() error {
	ports, err := freePorts(12)
	if err != nil {
		return err
	}
	tmpl, err := os.ReadFile(filepath.Join(s.home, "config.yaml.template"))
	if err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")
	logs := filepath.Join(s.dir, "logs")
	values := map[string]string{
		"etcd_data_dir": filepath.Join(data, "etcd.data"), "local_storage_dir": data,
		"rocksmq_data_dir": filepath.Join(data, "rocksmq"), "system_log_path": logs,
		"etcd_log_path": filepath.Join(logs, "etcd.log"),
	}
	for i, name := range []string{"etcd_port", "root_coord_port", "proxy_port", "proxy_internal_port",
		"query_coord_port", "query_node_port", "index_coord_port", "index_node_port", "data_coord_port", "data_node_port"} {
		values[name] = strconv.Itoa(ports[i])
	}
	cfg, err := fillTemplate(tmpl, values)
	if err != nil {
		return err
	}
	// A killed server's etcd session blocks its successor until the lease ends: 10 s instead of
	// the template's 30 (TestBuildResumesAfterMilvusWentAway 90 -> 64 s; 4 s gave 48 s, but a
	// lease that short could lapse on a loaded 2-core machine).
	if cfg, err = setSessionTTL(cfg, 10); err != nil {
		return err
	}
	etcdClient, etcdPeer := ports[0], ports[10]
	s.metrics = ports[11]
	s.Addr = net.JoinHostPort("127.0.0.1", values["proxy_port"])
	etcd := fmt.Sprintf("name: needle-test\nlisten-client-urls: http://127.0.0.1:%[1]d\nadvertise-client-urls: http://127.0.0.1:%[1]d\n"+
		"listen-peer-urls: http://127.0.0.1:%[2]d\ninitial-advertise-peer-urls: http://127.0.0.1:%[2]d\n"+
		"initial-cluster: needle-test=http://127.0.0.1:%[2]d\ndata-dir: %[3]s\n", etcdClient, etcdPeer, values["etcd_data_dir"])
	glog, err := os.ReadFile(filepath.Join(s.home, "glog.conf"))
	if err != nil {
		return err
	}
	for _, dir := range []string{"configs", "data", "logs"} {
		if err := os.MkdirAll(filepath.Join(s.dir, dir), 0o755); err != nil {
			return err
		}
	}
	for name, body := range map[string][]byte{"milvus.yaml": cfg, "glog.conf": glog, "embedEtcd.yaml": []byte(etcd)} {
		if err := os.WriteFile(filepath.Join(s.dir, "configs", name), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// setSessionTTL sets common.session.ttl, the lease (seconds) of each Milvus component's etcd
// session, in the filled config.
func setSessionTTL(cfg []byte, seconds int) ([]byte, error) {
	re := regexp.MustCompile(`(?m)^(    ttl: )30( #.*)$`)
	if len(re.FindAll(cfg, -1)) != 1 {
		return nil, errors.New("config template: no single `ttl: 30` line (common.session.ttl) to shorten")
	}
	return re.ReplaceAll(cfg, []byte("${1}"+strconv.Itoa(seconds)+"${2}")), nil
}

// slot is a template slot: {{ name }}, {{ name: default }}, {{ name(type): default }}.
var slot = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*(?:\(\w+\))?\s*(?::\s*([^}]*?))?\s*\}\}`)

// fillTemplate replaces every slot of tmpl by values[name], else its default; a slot with
// neither is an error.
func fillTemplate(tmpl []byte, values map[string]string) ([]byte, error) {
	var missing []string
	out := slot.ReplaceAllFunc(tmpl, func(m []byte) []byte {
		sub := slot.FindSubmatch(m)
		if v, ok := values[string(sub[1])]; ok {
			return []byte(v)
		}
		if len(sub[2]) == 0 {
			missing = append(missing, string(sub[1]))
		}
		return sub[2]
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("config template slots without a value: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Restart starts the server (again, after Stop or Kill) on the same folder and ports and
// waits until /healthz answers OK: data inserted before survives, as on a real restart.
// Milvus itself once aborted while starting (a Go runtime crash inside its config code, in one
// of four full `make test` runs on 2026-11-27; the test passed on three reruns): a server that
// dies while starting is started once more, its crash logged; a second death fails the test.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.cmd != nil {
		t.Fatal("milvustest: Restart of a running server")
	}
	err := s.launch()
	if errors.Is(err, errExited) {
		crash := crashLines(s.logPath())
		t.Logf("milvustest: %v; starting it once more. Its crash:\n%s", err, crash)
		// A port taken between freePorts and Milvus's bind: a server that never ran can move.
		if strings.Contains(crash, "address already in use") && !s.healthy {
			if err := s.configure(); err != nil {
				t.Fatalf("milvustest: %v", err)
			}
		}
		err = s.launch()
	}
	if err != nil {
		s.Kill()
		t.Fatalf("milvustest: %v; last lines of %s:\n%s", err, s.logPath(), tail(s.logPath(), 30))
	}
}

// errExited is launch's error when Milvus exits before it is healthy.
var errExited = errors.New("milvus exited while starting")

// launch starts Milvus and waits until it is healthy.
func (s *Server) launch() error {
	bin := filepath.Join(s.home, "bin")
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "milvus"), "run", "standalone", "-alias", s.alias)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(),
		"DEPLOY_MODE=STANDALONE",
		"METRICS_PORT="+strconv.Itoa(s.metrics),
		"ETCD_CONFIG_PATH="+filepath.Join(s.dir, "configs", "embedEtcd.yaml"),
		"LD_LIBRARY_PATH="+bin+":"+os.Getenv("LD_LIBRARY_PATH"),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(s.exited)
	return s.waitHealthy()
}

func (s *Server) waitHealthy() error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", s.metrics)
	client := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			err := fmt.Errorf("%w (%v)", errExited, s.cmd.ProcessState)
			s.cmd = nil // it ended: nothing to kill
			return err
		default:
		}
		if resp, err := client.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte("OK")) {
				s.healthy = true
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("milvus not healthy after %v at %s", startTimeout, url)
}

// Stop asks the server to shut down (SIGTERM) and kills it if it has not exited in 20 s.
func (s *Server) Stop() { s.signal(syscall.SIGTERM, 20*time.Second) }

// Kill ends the server at once (SIGKILL), as a crash or a lost machine would.
func (s *Server) Kill() { s.signal(syscall.SIGKILL, 0) }

func (s *Server) signal(sig syscall.Signal, grace time.Duration) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(grace):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "logs", "milvus-stdout.log") }

// freePorts returns n distinct loopback ports that were free a moment ago, drawn below the
// kernel's ephemeral range: a port from that range can be taken by any outgoing connection
// (Milvus's own components dial each other and etcd while the rest still bind) before Milvus
// binds it, which crashed a start with "bind: address already in use".
func freePorts(n int) ([]int, error) {
	low := ephemeralLow()
	const floor = 10000
	if low-floor < 4*n {
		return nil, fmt.Errorf("no port range below the ephemeral one (starts at %d)", low)
	}
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("no %d free loopback ports in [%d, %d)", n, floor, low)
		}
		port := floor + rand.IntN(low-floor)
		if slices.Contains(ports, port) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		defer ln.Close()
		ports = append(ports, port)
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default 32768 when
// the setting cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &low) // a value that does not parse leaves the default
	}
	return low
}

// tail returns the last n lines of the file at path (for failure reports).
// crashLines returns the lines of the log at path that say why a Go program died.
func crashLines(path string) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "SIG") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
