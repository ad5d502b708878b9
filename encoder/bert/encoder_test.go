package bert

import (
	"context"
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"needle/internal/gate"
	"needle/testkit/testenv"
)

// EncodeContext gives the vectors of Encode while ctx lives, and ctx's error once it ended
// (the batcher's way to stop a batch no client waits for).
func TestEncodeContextStops(t *testing.T) {
	e, err := Load(writeTinyModel(t, tinyWeights(t, 10), "", "F32", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"alpha beta", "gamma"}
	want, err := e.Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.EncodeContext(context.Background(), texts, "")
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("live context: %v, vectors equal %v", err, slices.Equal(got, want))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.EncodeContext(ctx, texts, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: %v, want context.Canceled", err)
	}
}

// EncodeContext under a gate (the server's bulk work) waits at it while interactive work holds
// it, then gives Encode's vectors.
func TestEncodeContextWaitsAtTheGate(t *testing.T) {
	e, err := Load(writeTinyModel(t, tinyWeights(t, 10), "", "F32", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"alpha beta", "gamma"}
	want, err := e.Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	var g gate.Gate
	u, err := g.Begin(context.Background(), true) // as the server's batcher begins a bulk batch
	if err != nil {
		t.Fatal(err)
	}
	defer u.End()
	ctx := gate.With(context.Background(), u)
	g.Enter()
	type encoded struct {
		vecs []float32
		err  error
	}
	done := make(chan encoded)
	go func() {
		vecs, err := e.EncodeContext(ctx, texts, "")
		done <- encoded{vecs, err}
	}()
	for g.Pauses() == 0 {
		runtime.Gosched()
	}
	g.Leave()
	if got := <-done; got.err != nil || !slices.Equal(got.vecs, want) {
		t.Errorf("after waiting at the gate: %v, vectors equal %v", got.err, slices.Equal(got.vecs, want))
	}
}

// On MiniLM, with batches of hundreds of tokens (the Linears on sgemm, in 128-row chunks under
// a context that can end): a context that lives gives Encode's exact bits; one that ends part
// way through gives context.Canceled and no vectors.
func TestEncodeContextMiniLM(t *testing.T) {
	e := loadMiniLM(t)
	texts := testenv.ReadJSONL[string](t, "testdata/golden_texts.jsonl")
	want, err := e.Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := e.EncodeContext(ctx, texts, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("live cancellable context: float %d = %g, Encode gives %g", i, got[i], want[i])
		}
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel) // inside the first batch: the encode takes seconds
	if got, err := e.EncodeContext(ctx, slices.Repeat(texts, 4), ""); !errors.Is(err, context.Canceled) || got != nil {
		t.Errorf("context ended part way: %d floats, %v; want none and context.Canceled", len(got), err)
	}
}
