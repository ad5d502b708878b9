package receiver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/internal/prom"
	"needle/safetensors/synth"
	"needle/weights/wire"
)

var update = Update{Path: `/dev/shm/m "x"/model.safetensors`, Dir: `/dev/shm/m "x"`, Run: "r1", Version: 42}

// TestHTTP: SGLang's contract, as its http_server.py answers: 200 {"success": true} on success,
// 400 {"success": false, "message": ...} on failure; the body's placeholders are JSON-escaped.
func TestHTTPNotifier(t *testing.T) {
	var got map[string]any
	ok := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &got)
		if r.URL.Path != "/update_weights_from_disk" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(404)
			return
		}
		if !ok {
			w.WriteHeader(400)
			w.Write([]byte(`{"success": false, "message": "Failed to update weights: shape mismatch", "num_paused_requests": 0}`))
			return
		}
		w.Write([]byte(`{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 0}`))
	}))
	defer srv.Close()
	h := &HTTPNotifier{URL: srv.URL + "/update_weights_from_disk", Body: `{"model_path": "{dir}", "weight_version": "{version}"}`}
	if err := h.Notify(context.Background(), update); err != nil {
		t.Fatal(err)
	}
	if got["model_path"] != update.Dir || got["weight_version"] != "42" {
		t.Fatalf("engine got %v", got)
	}
	ok = false
	if err := h.Notify(context.Background(), update); err == nil || !strings.Contains(err.Error(), "shape mismatch") {
		t.Fatalf("failure answer: %v", err)
	}
	if err := (&HTTPNotifier{URL: srv.URL + "/update_weights_from_disk", Body: `{"model_path": {dir}}`}).Notify(context.Background(), update); err == nil {
		t.Fatal("a body that is not JSON was sent")
	}
}

func TestCommandNotifier(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	c := &CommandNotifier{Argv: []string{"sh", "-c", `echo "$NEEDLE_WEIGHTS_VERSION $NEEDLE_WEIGHTS_RUN $NEEDLE_WEIGHTS_PATH" > ` + out}}
	if err := c.Notify(context.Background(), update); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "42 r1 "+update.Path {
		t.Fatalf("command saw %q", b)
	}
	if err := (&CommandNotifier{Argv: []string{"sh", "-c", "echo engine down >&2; exit 3"}}).Notify(context.Background(), update); err == nil || !strings.Contains(err.Error(), "engine down") {
		t.Fatalf("failing command: %v", err)
	}
}

func TestNewNotifier(t *testing.T) {
	if _, err := NewNotifier("http://x", "", []string{"true"}); err == nil {
		t.Error("a URL and a command were both accepted")
	}
	n, err := NewNotifier("http://127.0.0.1:30000/update_weights_from_disk", "", nil)
	if err != nil || n.String() != "POST http://127.0.0.1:30000/update_weights_from_disk" || n.(*HTTPNotifier).Body != SGLangBody {
		t.Errorf("URL notifier: %v %v", n, err)
	}
	if n, _ := NewNotifier("", "", nil); n != nil {
		t.Errorf("no settings gave notifier %v", n)
	}
}

// TestNotifiedVersionGauge: needle_weights_receiver_notified_version follows the versions the
// engine took, not those that arrived: a failed notification leaves it where it was.
func TestNotifiedVersionGauge(t *testing.T) {
	dir := t.TempDir()
	_, snd, pub := startSender(t, filepath.Join(dir, "send"), wire.Packed)
	reg := prom.NewRegistry()
	engine := &CommandNotifier{Argv: []string{"sh", "-c", `test "$NEEDLE_WEIGHTS_VERSION" != 2`}} // down for version 2
	r := startReceiverWith(t, filepath.Join(dir, "r", "model.safetensors"), false, func(o *Options) {
		o.Notifier, o.Metrics = engine, reg
	}, snd.addr)
	gauge := reg.Gauge("needle_weights_receiver_notified_version", "")
	img, _ := synth.Image(model, 1)
	for v, want := range []float64{1, 1, 3} {
		if v > 0 {
			img = synth.Step(img, 0.01, uint64(v))
		}
		if _, err := pub.PublishImage(img, 0); err != nil {
			t.Fatal(err)
		}
		r.waitFor(t, uint64(v+1))
		if got := gauge.Get(); got != want {
			t.Fatalf("after version %d the gauge is %v, want %v", v+1, got, want)
		}
	}
}
