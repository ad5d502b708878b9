package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"needle/safetensors/synth"
	"needle/testkit/netcluster"
	"needle/weights/sender"
)

// rigFlags are the settings every rehearsal has: the cluster, the versions and what is written.
type rigFlags struct {
	hosts, mib, versions int
	link, dir, out, logs string
	changed              float64
}

func (f *rigFlags) define(fs *flag.FlagSet) {
	fs.IntVar(&f.hosts, "hosts", 8, "rollout hosts (one more host runs the trainer's sender)")
	fs.StringVar(&f.link, "link", "1gbit", "every host's link rate, both ways, in tc's units (1gbit, 500mbit)")
	fs.IntVar(&f.mib, "mib", 512, "size of a version in MiB (BF16 tensors of 32 MiB)")
	fs.IntVar(&f.versions, "versions", 4, "versions to publish: the first travels in full, the others as deltas")
	fs.Float64Var(&f.changed, "changed", 0.01, "fraction of elements an optimizer step changes")
	fs.StringVar(&f.dir, "dir", "/dev/shm", "a tmpfs where the hosts keep their files")
	fs.StringVar(&f.out, "json", "", "write the per-version figures here as JSON")
	fs.StringVar(&f.logs, "logs", "", "write each process's log lines into this folder at the end")
}

// weightsFlags are needle's rehearsal's settings.
type weightsFlags struct {
	rigFlags
	fanout, threads int
	needle          string
	star, token     bool
}

// versionReport is one version's figures.
type versionReport struct {
	Version   uint64    `json:"version"`
	Full      bool      `json:"full"`
	Bytes     int64     `json:"bytes"`         // of the version's file
	SL        float64   `json:"s_over_l"`      // Bytes over the link rate, seconds
	Goal      float64   `json:"goal_seconds"`  // 1.3 S/L + 1 (full) or 0.1 S/L + 0.5 (delta)
	Publish   float64   `json:"publish"`       // the trainer's publish call (copy into the half, commit)
	Ready     []float64 `json:"ready"`         // per host, from the publish call to the host ready
	Last      float64   `json:"last"`          // the slowest host
	Uplink    []int64   `json:"uplink_bytes"`  // per host (0: the trainer), bytes its link carried up
	CPUBusy   float64   `json:"cpu_busy"`      // share of the machine's CPU time busy until the last host was ready
	ReadyKind []string  `json:"receiver_kind"` // per host: full or delta, as its log said
}

func weights(args []string) error {
	var f weightsFlags
	fs := flag.NewFlagSet("cluster weights", flag.ContinueOnError)
	f.define(fs)
	fs.IntVar(&f.fanout, "fanout", 1, "the sender's --fanout (1: a chain)")
	fs.IntVar(&f.threads, "threads", 2, "--threads of each needle process")
	fs.BoolVar(&f.star, "star", false, "receivers do not re-serve: all pull from the sender (the baseline layout)")
	fs.BoolVar(&f.token, "token", false, "every daemon proves a shared token (--token-file) to its peers")
	fs.StringVar(&f.needle, "needle", "bin/needle", "the needle binary the hosts run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bin, err := filepath.Abs(f.needle)
	if err != nil {
		return err
	}
	rg, err := newRig(f.rigFlags, nil)
	if err != nil {
		return err
	}
	defer rg.Close()
	c, work, procs := rg.c, rg.work, rg.procs

	var auth []string
	if f.token {
		path := filepath.Join(work, "token")
		if err := os.WriteFile(path, []byte(strconv.FormatInt(time.Now().UnixNano(), 36)+"\n"), 0o600); err != nil {
			return err
		}
		auth = []string{"--token-file", path}
	}
	send := procs.start(c.Hosts[0], "sender", bin, append([]string{"weights", "send", "--dir", filepath.Join(work, "send"),
		"--listen", ":7070", "--http", "", "--threads", fmt.Sprint(f.threads), "--fanout", fmt.Sprint(f.fanout)}, auth...)...)
	var pub *sender.Publisher
	if err := until(30*time.Second, func() bool { pub, err = sender.Dial(filepath.Join(work, "send")); return err == nil }); err != nil {
		return fmt.Errorf("the sender did not start: %v\n%s", err, send.text())
	}
	defer pub.Close()
	var recv []*process
	for i := 1; i <= f.hosts; i++ {
		out := filepath.Join(work, fmt.Sprintf("h%d", i), "model.safetensors")
		os.MkdirAll(filepath.Dir(out), 0o755)
		args := append([]string{"weights", "recv", "--from", c.Hosts[0].Addr(7070), "--out", out, "--threads", fmt.Sprint(f.threads), "--name", fmt.Sprintf("h%d", i)}, auth...)
		if !f.star {
			args = append(args, "--serve", ":7070")
		}
		p := procs.start(c.Hosts[i], fmt.Sprintf("h%d", i), bin, args...)
		if err := until(30*time.Second, p.joined); err != nil {
			return fmt.Errorf("h%d did not join: %v\n%s", i, err, p.text())
		}
		recv = append(recv, p)
	}

	img, opt := model(f.mib, f.changed)
	var reports []versionReport
	for v := 1; v <= f.versions; v++ {
		opt.Version(img, v-1, 2) // the optimizer's master after v-1 steps, in bf16
		if v > 1 {
			if err := settled(recv, uint64(v-1)); err != nil {
				return err
			}
		}
		r, err := publishOne(c, recv, int64(len(img)), uint64(v), rg.rate, func() error {
			if got, err := pub.PublishImage(img, uint64(v)); err != nil || got != uint64(v) {
				return fmt.Errorf("publish version %d: %d, %v", v, got, err)
			}
			return nil
		})
		if err != nil {
			procs.dump()
			return err
		}
		reports = append(reports, r)
		r.print()
	}
	return writeJSON(f.out, reports)
}

// rig is what a rehearsal stands on: a cluster of a trainer's host h0 and rollout hosts h1..,
// a work folder on a tmpfs, the links' rate in bits per second, and the processes started.
type rig struct {
	c     *netcluster.Cluster
	work  string
	rate  float64
	procs *processes
	logs  string
	// onClose, if set, runs last in Close: it removes what the rehearsal's programs leave behind.
	onClose func()
}

// newRig makes a rig whose processes' logs are read for m (nil: needle's), and prints what one TCP
// stream carries over a link. Close tears it down, and so does an interrupt.
func newRig(f rigFlags, m *marks) (*rig, error) {
	rate, err := parseRate(f.link)
	if err != nil {
		return nil, err
	}
	c, err := netcluster.New(netcluster.Options{Hosts: f.hosts + 1, Rate: f.link})
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(f.dir, "needle-cluster")
	if err != nil {
		c.Close()
		return nil, err
	}
	rg := &rig{c: c, work: work, rate: rate, procs: &processes{marks: m}, logs: f.logs}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		rg.Close()
		os.Exit(1)
	}()
	one, err := streamRate(c)
	if err != nil {
		rg.Close()
		return nil, err
	}
	fmt.Printf("link %s (%.0f Mbit/s), one TCP stream h0 -> h1 carried %.0f Mbit/s of payload (%.0f%% of the rate)\n",
		f.link, rate/1e6, one/1e6, 100*one/rate)
	return rg, nil
}

func (rg *rig) Close() {
	if rg.logs != "" {
		rg.procs.writeLogs(rg.logs)
	}
	rg.procs.killAll()
	rg.c.Close()
	os.RemoveAll(rg.work)
	if rg.onClose != nil {
		rg.onClose()
	}
}

// model returns the first version's safetensors image of mib MiB (BF16 tensors of 32 MiB) and
// the optimizer that writes each version into it.
func model(mib int, changed float64) ([]byte, synth.Optimizer) {
	tensors := make([]synth.Tensor, mib/32)
	for i := range tensors {
		tensors[i] = synth.T(fmt.Sprintf("layers.%d.mlp.weight", i), "BF16", 2048, 8192)
	}
	img, _ := synth.Image(tensors, 1)
	return img, synth.Calibrated(1, changed)
}

func (r versionReport) print() {
	kind := "delta"
	if r.Full {
		kind = "full"
	}
	fmt.Printf("version %d (%s, %.1f MB): publish call %.2fs; last host ready %.2fs after it (goal %.2fs: %s); S/L %.2fs; CPU busy %.0f%%\n",
		r.Version, kind, float64(r.Bytes)/1e6, r.Publish, r.Last, r.Goal, met(r.Last <= r.Goal), r.SL, 100*r.CPUBusy)
	fmt.Printf("  ready per host (s): %s\n  link bytes up per host (trainer first, MB): %s\n", floats(r.Ready), mbs(r.Uplink))
}

func writeJSON(out string, reports []versionReport) error {
	if out == "" {
		return nil
	}
	b, _ := json.MarshalIndent(reports, "", "  ")
	return os.WriteFile(out, b, 0o644)
}

// publishOne times version v, of size bytes, from the publish call (publish) until every
// receiver is ready with it.
func publishOne(c *netcluster.Cluster, recv []*process, size int64, v uint64, rate float64, publish func() error) (versionReport, error) {
	r := versionReport{Version: v, Full: v == 1, Bytes: size}
	r.SL = float64(size) * 8 / rate
	r.Goal = 0.1*r.SL + 0.5
	if r.Full {
		r.Goal = 1.3*r.SL + 1
	}
	up0 := uplinks(c)
	busy0, total0 := cpuTimes()
	start := time.Now()
	if err := publish(); err != nil {
		return r, err
	}
	r.Publish = time.Since(start).Seconds()
	for _, p := range recv {
		if err := until(10*time.Minute, func() bool { at, _ := p.readyAt(v); return !at.IsZero() }); err != nil {
			return r, fmt.Errorf("%s never held version %d", p.name, v)
		}
		at, kind := p.readyAt(v)
		r.Ready = append(r.Ready, at.Sub(start).Seconds())
		r.ReadyKind = append(r.ReadyKind, kind)
		r.Last = max(r.Last, at.Sub(start).Seconds())
	}
	busy1, total1 := cpuTimes()
	r.CPUBusy = float64(busy1-busy0) / float64(max(total1-total0, 1))
	up1 := uplinks(c)
	for i := range up1 {
		r.Uplink = append(r.Uplink, up1[i]-up0[i])
	}
	return r, nil
}

// settled waits until every receiver has made its spare of version v (its log says so), so
// that each version is timed on a machine that is not still finishing the last one, as in
// training, where versions come tens of seconds apart.
func settled(recv []*process, v uint64) error {
	line := fmt.Sprintf("spare of version %d made", v)
	for _, p := range recv {
		if err := until(5*time.Minute, func() bool { return strings.Contains(p.text(), line) }); err != nil {
			return fmt.Errorf("%s: no %q: %v", p.name, line, err)
		}
	}
	return nil
}

// process is a daemon in a host with its log lines and ready versions.
type process struct {
	name  string
	cmd   *exec.Cmd
	marks marks
	mu    sync.Mutex
	lines []string
	ready map[uint64]readyLine
	join  bool
}

// marks are the log lines that say a receiver joined and that it is ready with a version
// (groups: the version, full or delta).
type marks struct {
	joined string
	ready  *regexp.Regexp
}

var needleMarks = marks{"routes this host through", regexp.MustCompile(`needle weights recv: version (\d+) \((\w+),`)}

type readyLine struct {
	at   time.Time
	kind string
}

// processes are a rehearsal's daemons; their logs are read for marks (needle's by default).
type processes struct {
	all   []*process
	marks *marks
}

func (ps *processes) start(h *netcluster.Host, name, bin string, args ...string) *process {
	return ps.run(name, h.Command(context.Background(), bin, args...))
}

// run starts cmd and reads its standard error.
func (ps *processes) run(name string, cmd *exec.Cmd) *process {
	p := &process{name: name, cmd: cmd, marks: needleMarks, ready: map[uint64]readyLine{}}
	if ps.marks != nil {
		p.marks = *ps.marks
	}
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		p.lines = append(p.lines, err.Error())
		return p
	}
	ps.all = append(ps.all, p)
	go p.scan(stderr)
	return p
}

// dump prints every process's log lines, for a rehearsal that failed.
func (ps *processes) dump() {
	for _, p := range ps.all {
		fmt.Fprintf(os.Stderr, "--- %s\n%s\n", p.name, p.text())
	}
}

func (ps *processes) killAll() {
	for _, p := range ps.all {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// writeLogs writes each process's lines to dir/NAME.log.
func (ps *processes) writeLogs(dir string) {
	os.MkdirAll(dir, 0o755)
	for _, p := range ps.all {
		os.WriteFile(filepath.Join(dir, p.name+".log"), []byte(p.text()+"\n"), 0o644)
	}
}

func (p *process) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		now, line := time.Now(), sc.Text()
		p.mu.Lock()
		p.lines = append(p.lines, line)
		if m := p.marks.ready.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseUint(m[1], 10, 64)
			p.ready[v] = readyLine{now, m[2]}
		}
		p.join = p.join || strings.Contains(line, p.marks.joined)
		p.mu.Unlock()
	}
	io.Copy(io.Discard, r) // past a line too long to keep: never let the process block on its pipe
}

func (p *process) readyAt(v uint64) (time.Time, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, found := readyLine{}, uint64(0)
	for got, l := range p.ready { // a host that was behind may go straight to a newer version
		if got >= v && (found == 0 || got < found) {
			best, found = l, got
		}
	}
	return best.at, best.kind
}

func (p *process) joined() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.join
}

func (p *process) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

func until(limit time.Duration, cond func() bool) error {
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", limit)
		}
	}
	return nil
}

// streamRate is the payload rate of one TCP stream from h0 to h1 over 3 s.
func streamRate(c *netcluster.Cluster) (float64, error) {
	ln, err := c.Hosts[1].Listen("tcp", c.Hosts[1].Addr(9999))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer s.Close()
		n, _ := io.Copy(io.Discard, s)
		got <- n
	}()
	conn, err := c.Hosts[0].Dial(context.Background(), "tcp", c.Hosts[1].Addr(9999))
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if _, err := conn.Write(buf); err != nil {
			return 0, err
		}
	}
	conn.Close()
	n := <-got
	return float64(n) * 8 / time.Since(start).Seconds(), nil
}

// uplinks returns the bytes each host has sent on its link (0 where tc could not tell).
func uplinks(c *netcluster.Cluster) []int64 {
	var out []int64
	for _, h := range c.Hosts {
		n, _ := h.Sent()
		out = append(out, n)
	}
	return out
}

// cpuTimes returns the machine's busy and total CPU time so far (/proc/stat, in ticks).
func cpuTimes() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:] // user nice system idle iowait irq softirq steal
	for i, s := range f {
		n, _ := strconv.ParseInt(s, 10, 64)
		if i >= 8 {
			break
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total
}

// parseRate reads tc's rate units (bit, kbit, mbit, gbit) as bits per second.
func parseRate(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if v, ok := strings.CutSuffix(strings.ToLower(s), u.suffix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n <= 0 {
				break
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("--link %q: want a rate such as 1gbit or 500mbit", s)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func floats(xs []float64) string {
	var b strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&b, " %.2f", x)
	}
	return b.String()
}

func mbs(xs []int64) string {
	var b strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&b, " %.1f", float64(x)/1e6)
	}
	return b.String()
}
