package weights

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"needle/bench/synth"
	"needle/weights/receiver"
	"needle/weights/sender"
)

// TestDaemons: the sender and a re-serving receiver as `needle weights send|recv` run them,
// with a token; a version published through the control socket reaches the receiver's file,
// both /metrics endpoints count it (for a bearer of the token only), and the sender's /status
// shows the receiver in its layout.
func TestDaemons(t *testing.T) {
	token := []byte("s3cret")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type addrs struct{ tcp, http string }
	up := make(chan addrs, 2)
	ready := func(tcp, h string) { up <- addrs{tcp, h} }
	sendDone := make(chan error, 1)
	go func() {
		sendDone <- RunSender(ctx, SendOptions{Sender: sender.Options{Dir: filepath.Join(dir, "send"), Chunk: 4096, Keep: 2, Threads: 2},
			Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Fanout: 1, Silence: time.Second, Token: token}, ready)
	}()
	snd := <-up
	out := filepath.Join(dir, "recv", "model.safetensors")
	os.MkdirAll(filepath.Dir(out), 0o755)
	got := make(chan uint64, 4)
	recvDone := make(chan error, 1)
	go func() {
		recvDone <- RunReceiver(ctx, RecvOptions{Receiver: receiver.Options{Upstreams: []string{snd.tcp}, Out: out, Threads: 2, Token: token, Silence: time.Second,
			Ready: func(_ string, v uint64) { got <- v }}, Serve: "127.0.0.1:0", HTTP: "127.0.0.1:0"}, ready)
	}()
	rcv := <-up
	if rcv.tcp == "" {
		t.Fatal("a re-serving receiver reported no TCP address")
	}
	img, _ := synth.Image([]synth.Tensor{synth.T("w", "BF16", 4096)}, 3)
	p, err := sender.Dial(filepath.Join(dir, "send"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for v := uint64(1); v <= 2; v++ {
		if v == 2 {
			img = synth.Step(img, 0.01, 9)
		}
		if _, err := p.PublishImage(img, 0); err != nil {
			t.Fatal(err)
		}
		for <-got != v {
		}
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.Equal(b, img) {
		t.Fatalf("receiver file differs from version 2 (err %v)", err)
	}
	get := func(url string, bearer bool) (int, string) {
		req, _ := http.NewRequest("GET", url, nil)
		if bearer {
			req.Header.Set("Authorization", "Bearer "+string(token))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct{ addr, want string }{
		{snd.http, `needle_weights_version 2`},
		{snd.http, `needle_weights_transfers_total{first="delta",resumed="false"} 1`},
		{rcv.http, `needle_weights_receiver_versions_total{kind="delta"} 1`},
		{rcv.http, `needle_weights_receiver_version 2`},
	} {
		if code, body := get("http://"+c.addr+"/metrics", true); code != 200 || !strings.Contains(body, c.want+"\n") {
			t.Errorf("%s/metrics (%d) lacks %q:\n%s", c.addr, code, c.want, body)
		}
		if code, _ := get("http://"+c.addr+"/metrics", false); code != http.StatusUnauthorized {
			t.Errorf("%s/metrics answered %d without the token", c.addr, code)
		}
	}
	if code, body := get("http://"+snd.http+"/status", true); code != 200 || !strings.Contains(body, `"layout":[["",[]]]`) {
		t.Errorf("the sender's /status (%d) does not show the receiver in its layout: %s", code, body)
	}
	cancel()
	if err := <-sendDone; err != nil {
		t.Errorf("sender: %v", err)
	}
	if err := <-recvDone; err != nil {
		t.Errorf("receiver: %v", err)
	}
}
