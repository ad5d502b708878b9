package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"needle/faissgo"
	"needle/index/compact"
	"needle/index/indexdir"
	"needle/testkit/testflat"
	"needle/testkit/testvec"
)

// convertSource writes a flat index file of n clustered rows of dimension dim.
func convertSource(t *testing.T, n int64, dim int) string {
	path := filepath.Join(t.TempDir(), "flat.index")
	chunk := testvec.Clustered(8192, dim, 7, 0)
	testflat.WriteFlat(t, path, faissgo.IP, dim, n, func(int64, int64) []float32 { return chunk })
	return path
}

// convertArgs are the arguments of the conversions below: a checkpoint after every chunk.
func convertArgs(src, out string) []string {
	return []string{"convert", "--from", src, "--out", out, "--factory", "IVF64,PQ32x4np", "--train-size", "4000",
		"--checkpoint-rows", "16384", "--threads", "2"}
}

// A conversion killed with SIGKILL after a few checkpoints resumes on rerun and ends with the
// bytes of an uninterrupted one; progress and checkpoints show on stderr; a rerun is up to
// date. Its peak memory does not grow with the source: converting 4x the rows takes about
// the same RSS (the codes grow by 24 bytes a row, the source by 512).
func TestConvertResumesAfterKill(t *testing.T) {
	tools := newBuildTools(t)
	const dim, n = 128, 16 * indexdir.ChunkRows
	src := convertSource(t, n, dim)
	whole := filepath.Join(t.TempDir(), "whole")
	cmd := exec.Command(tools.needle, convertArgs(src, whole)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, out)
	}
	for _, want := range []string{"training IVF64,PQ32x4np on 4000 sampled rows", "rows indexed", "checkpoint: 16384 rows", "262144 rows as IVF64,PQ32x4np"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("convert's output lacks %q:\n%s", want, out)
		}
	}
	bigRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss

	killed := filepath.Join(t.TempDir(), "killed")
	cmd = exec.Command(tools.needle, convertArgs(src, killed)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	sc, checkpoints := bufio.NewScanner(stderr), 0
	for checkpoints < 3 && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "checkpoint: ") {
			checkpoints++
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if checkpoints < 3 {
		t.Fatalf("convert ended before it could be killed after 3 checkpoints:\n%s", log.String())
	}
	for _, name := range []string{compact.IndexFileName, compact.FormName} {
		if _, err := os.Stat(filepath.Join(killed, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the killed conversion left %s", name)
		}
	}
	rerun := tools.run(convertArgs(src, killed)...)
	if !strings.Contains(rerun, "resuming after ") || strings.Contains(rerun, "resuming after 0 rows") || strings.Contains(rerun, "convert: training") {
		t.Fatalf("rerun did not resume from a checkpoint:\n%s", rerun)
	}
	if !bytes.Equal(readBytes(t, filepath.Join(killed, compact.IndexFileName)), readBytes(t, filepath.Join(whole, compact.IndexFileName))) {
		t.Fatal("the killed-and-resumed conversion's index differs from the uninterrupted one's")
	}
	if out := tools.run(convertArgs(src, killed)...); !strings.Contains(out, "is up to date") {
		t.Errorf("a third run is not up to date:\n%s", out)
	}

	small := convertSource(t, n/4, dim)
	cmd = exec.Command(tools.needle, convertArgs(small, filepath.Join(t.TempDir(), "small"))...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("convert: %v\n%s", err, out)
	}
	smallRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	t.Logf("peak RSS %d MB converting %d MB, %d MB converting %d MB", bigRSS>>10, int64(n)*dim*4>>20, smallRSS>>10, int64(n)*dim>>20)
	if grew := bigRSS - smallRSS; grew > 32<<10 {
		t.Errorf("converting 4x the rows took %d MB more at peak (%d MB more source)", grew>>10, int64(n)*dim*3>>20)
	}
}
