package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"needle/encoder/rerank"
	"needle/engine"
	"needle/testkit/crossenc"
	"needle/testkit/enginetest"
)

// TestServeRerank: with a reranker, /retrieve answers Search-R1's retrieve-then-rerank shape
// (strings, best reranked first, topk_rerank of them) and /rerank its own; without one,
// /rerank is a JSON 404.
func TestServeRerank(t *testing.T) {
	s0, _, _ := testServer(t, Config{MaxQueries: 8, DefaultTopK: 3, MaxTopK: 100, MaxHits: 1000}, false)
	if code, out, _ := do(s0, "POST", "/rerank", `{"queries":["q"],"documents":[[]]}`); code != 404 || !strings.Contains(string(out), "rerank-model") {
		t.Errorf("/rerank without a reranker: %d %s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "ce")
	crossenc.Model(t, dir, "torch.nn.modules.linear.Identity")
	c, err := rerank.Load(dir, rerank.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{MaxQueries: 8, DefaultTopK: 3, MaxTopK: 100, MaxHits: 1000})
	enc, docs, idx := testParts()
	r, err := engine.NewRetriever(enc, idx, docs, nil, "", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 8}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	s.SetRetriever(r.WithReranker(c))

	code, out, _ := do(s, "POST", "/retrieve", `{"queries":["topic3 word3","title7"],"topk_retrieval":6,"topk_rerank":2,"return_scores":true}`)
	var got struct {
		Result [][]struct {
			Document string  `json:"document"`
			Score    float64 `json:"score"`
		} `json:"result"`
	}
	if code != 200 || json.Unmarshal(out, &got) != nil || len(got.Result) != 2 {
		t.Fatalf("/retrieve: %d %s", code, out)
	}
	for q, list := range got.Result {
		if len(list) != 2 || list[0].Score < list[1].Score || !strings.HasPrefix(list[0].Document, `"`) {
			t.Errorf("query %d: %+v", q, list)
		}
	}
	// The scores are the cross-encoder's on the hit's reranker string.
	title, text, _ := strings.Cut(got.Result[0][0].Document, "\n")
	want, err := c.Score(context.Background(), []string{"topic3 word3"}, []string{"(Title: " + strings.Trim(title, `"`) + ") " + text})
	if err != nil || float32(got.Result[0][0].Score) != want[0] {
		t.Errorf("score %v, the cross-encoder's %v (%v)", got.Result[0][0].Score, want, err)
	}
	code, out, _ = do(s, "POST", "/retrieve", `{"queries":["title7"]}`)
	var plain struct{ Result [][]string }
	if code != 200 || json.Unmarshal(out, &plain) != nil || len(plain.Result[0]) != 3 {
		t.Errorf("/retrieve defaults: %d %s", code, out)
	}
	code, out, _ = do(s, "POST", "/rerank", `{"queries":["a","b"],"documents":[[{"contents":"\"x\"\ny"},{"document":{"contents":"\"z\"\nw"}}],[]],"rerank_topk":1}`)
	if code != 200 || !strings.Contains(string(out), `"result":[["(Title: `) || !strings.Contains(string(out), `],[]]}`) {
		t.Errorf("/rerank: %d %s", code, out)
	}
}
