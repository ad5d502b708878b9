package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// astraflowMarks are the lines bench/astraflow_cluster.py prints in a RaaS host.
var astraflowMarks = marks{"astraflow raas: joined", regexp.MustCompile(`astraflow raas: version (\d+) \((\w+)\) ok=True`)}

// astraflow runs AstraFlow's own weight transfer (an AstraFlow checkout, never part of this
// repository, driven by bench/astraflow_cluster.py) on the cluster, versions and counters of
// `weights`: its trainer side (WeightManager and its sender subprocess) in h0, a RaaS (its
// manager and routes, with a stand-in SGLang) in each rollout host. The versions are the same
// bytes needle's rehearsal publishes, handed to the trainer as safetensors files.
func astraflow(args []string) error {
	var f struct {
		rigFlags
		checkout, python, driver string
	}
	fs := flag.NewFlagSet("cluster astraflow", flag.ContinueOnError)
	f.define(fs)
	fs.StringVar(&f.checkout, "checkout", "", "an AstraFlow checkout (required)")
	fs.StringVar(&f.python, "python", "python3", "a Python with bench/requirements-astraflow.txt installed")
	fs.StringVar(&f.driver, "driver", "bench/astraflow_cluster.py", "the script that runs AstraFlow in a host")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.checkout == "" {
		return fmt.Errorf("--checkout: the folder of an AstraFlow checkout is required")
	}
	driver, err := filepath.Abs(f.driver)
	if err != nil {
		return err
	}
	rg, err := newRig(f.rigFlags, &astraflowMarks)
	if err != nil {
		return err
	}
	defer rg.Close()
	// What AstraFlow's killed processes leave behind: its sender's buffers, and the named
	// semaphores of Python's multiprocessing (sem.mp-*), whose unlink was its resource
	// tracker's job: those created during the run that no live process maps.
	buffers, semaphores := removeNew("/dev/shm/astraflow_*"), removeNew("/dev/shm/sem.mp-*")
	rg.onClose = func() { buffers(); semaphores() }
	procs, h0 := rg.procs, rg.c.Hosts[0]
	var raas []string
	for i := 1; i <= f.hosts; i++ {
		raas = append(raas, fmt.Sprintf("h%d=http://%s", i, rg.c.Hosts[i].Addr(5000)))
	}
	common := []string{"--checkout", f.checkout, "--shm", rg.work}
	cmd := h0.Command(context.Background(), f.python, append([]string{driver, "trainer", "--ip", h0.IP, "--port", "18861",
		"--raas", strings.Join(raas, ",")}, common...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	trainer := procs.run("trainer", cmd)
	// tell sends the trainer a command (none: "") and waits for the line that answers it.
	tell := func(command, answer string) error {
		if command != "" {
			if _, err := io.WriteString(stdin, command+"\n"); err != nil {
				return fmt.Errorf("trainer: %v\n%s", err, trainer.text())
			}
		}
		if err := until(10*time.Minute, func() bool { return strings.Contains(trainer.text(), answer) }); err != nil {
			procs.dump()
			return fmt.Errorf("trainer never answered %q with %q", command, answer)
		}
		return nil
	}
	img, opt := model(f.mib, f.changed)
	file := filepath.Join(rg.work, "version.safetensors")
	// load hands the trainer version v as its state dict (before the clock starts, as a trained model is).
	load := func(v int) error {
		opt.Version(img, v-1, 2)
		if err := os.WriteFile(file, img, 0o644); err != nil {
			return err
		}
		defer os.Remove(file)
		return tell("load "+file, fmt.Sprintf("astraflow trainer: loaded %d", v))
	}
	if err := load(1); err != nil { // the first load also starts the sender, which the hosts join
		return err
	}
	var recv []*process
	for i := 1; i <= f.hosts; i++ {
		recv = append(recv, procs.start(rg.c.Hosts[i], fmt.Sprintf("h%d", i), f.python, append([]string{driver, "raas",
			"--port", "5000", "--sender", h0.Addr(18861), "--name", fmt.Sprintf("h%d", i)}, common...)...))
	}
	for _, p := range recv {
		if err := until(5*time.Minute, p.joined); err != nil {
			procs.dump()
			return fmt.Errorf("%s did not join: %v", p.name, err)
		}
	}
	if err := tell("register", "astraflow trainer: registered"); err != nil {
		return err
	}

	var reports []versionReport
	for v := 1; v <= f.versions; v++ {
		if v > 1 {
			if err := load(v); err != nil {
				return err
			}
		}
		r, err := publishOne(rg.c, recv, int64(len(img)), uint64(v), rg.rate, func() error {
			return tell(fmt.Sprintf("publish %d", v), fmt.Sprintf("astraflow trainer: version %d offloaded", v))
		})
		if err != nil {
			procs.dump()
			return err
		}
		if err := tell("", fmt.Sprintf("astraflow trainer: version %d notified", v)); err != nil {
			return err
		}
		reports = append(reports, r)
		r.print()
	}
	if err := tell("verify", "astraflow trainer: verified"); err != nil {
		return err
	}
	fmt.Println(lastLine(trainer.text(), "astraflow trainer: verified"))
	return writeJSON(f.out, reports)
}

// removeNew returns a function that removes the files matching pattern that were not there
// when removeNew was called and that no live process maps.
func removeNew(pattern string) func() {
	before := map[string]bool{}
	old, _ := filepath.Glob(pattern)
	for _, n := range old {
		before[n] = true
	}
	return func() {
		now, _ := filepath.Glob(pattern)
		for _, n := range now {
			if !before[n] && !mapped(n) {
				os.RemoveAll(n)
			}
		}
	}
}

// mapped reports whether a live process maps the file at path (a /proc/PID/maps line names it).
func mapped(path string) bool {
	maps, _ := filepath.Glob("/proc/[0-9]*/maps")
	for _, m := range maps {
		if b, err := os.ReadFile(m); err == nil && strings.Contains(string(b), path) {
			return true
		}
	}
	return false
}

func lastLine(text, prefix string) string {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], prefix) {
			return lines[i]
		}
	}
	return ""
}
