package weights

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"needle/testkit/testenv"
	"needle/weights/receiver"
	"needle/weights/sender"
)

// publishPy publishes two versions of a small model from NumPy through needle_trainer (fp32,
// fp16 and int64 tensors; the second changes a few elements), keeping them in an .npz; with
// "check" it compares the receiver's file, read by the safetensors package, with the second.
const publishPy = `
import sys, numpy as np, needle_trainer as nt
from safetensors.numpy import load_file
mode, d, npz = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "publish":
    rng = np.random.default_rng(0)
    t = {"w": rng.standard_normal((256, 64)).astype(np.float32), "h": rng.standard_normal(300).astype(np.float16),
         "ids": np.arange(10, dtype=np.int64)}
    assert nt.publish(t, dir=d) == 1
    t["w"][3, :5] += 1
    t["h"][7] = 0
    with nt.Publisher(d) as p:
        assert p.publish(t) == 2
        assert p.wait(2)["Changed"] == 6, p.wait(2)
    np.savez(npz, **t)
else:
    got, want = load_file(d), np.load(npz)
    assert sorted(got) == sorted(want.files), (sorted(got), want.files)
    for k in want.files:
        assert got[k].dtype == want[k].dtype and np.array_equal(got[k].view(np.uint8), want[k].view(np.uint8)), k
    print("equal")
`

// TestPythonPublish: a trainer publishing through needle_trainer.publish reaches a receiver's
// file byte for byte (read back with the safetensors package).
func TestPythonPublish(t *testing.T) {
	py := testenv.Python(t)
	dir := t.TempDir()
	send, out, npz := filepath.Join(dir, "send"), filepath.Join(dir, "r", "model.safetensors"), filepath.Join(dir, "want.npz")
	os.MkdirAll(filepath.Dir(out), 0o755)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := make(chan string, 1)
	go func() {
		o := SendOptions{Sender: sender.Options{Dir: send, Chunk: 4096, Threads: 2}, Listen: "127.0.0.1:0", Fanout: 1, Silence: time.Second}
		if err := RunSender(ctx, o, func(tcp, _ string) { up <- tcp }); err != nil {
			t.Error(err)
			close(up)
		}
	}()
	addr := <-up
	if addr == "" {
		return
	}
	got := make(chan uint64, 4)
	go func() {
		o := RecvOptions{Receiver: receiver.Options{Upstreams: []string{addr}, Out: out, Threads: 2, Silence: time.Second,
			Ready: func(_ string, v uint64) { got <- v }}}
		if err := RunReceiver(ctx, o, nil); err != nil {
			t.Error(err)
			close(got)
		}
	}()
	lib, _ := filepath.Abs(filepath.Join("..", "build", "native", "libneedle.so"))
	run := func(mode, target string) {
		cmd := exec.Command(py, "-c", publishPy, mode, target, npz)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join("..", "python"), "NEEDLE_LIB="+lib)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("python %s: %v\n%s", mode, err, b)
		}
	}
	run("publish", send)
	for v := range got {
		if v == 2 {
			break
		}
	}
	run("check", out)
}
