package rerank

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"needle/testkit/crossenc"
	"needle/testkit/testenv"
)

type golden struct {
	Activation string     `json:"activation"`
	Pairs      [][]string `json:"pairs"`
	Scores     []float64  `json:"scores"`
}

// TestMatchesSentenceTransformers: scores within 1e-5 of CrossEncoder.predict on the same
// weights, for identity and sigmoid heads, pairs past the 512-token limit included.
func TestMatchesSentenceTransformers(t *testing.T) {
	var want []golden
	b, err := os.ReadFile("testdata/golden_scores.json")
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range want {
		dir := filepath.Join(t.TempDir(), "ce")
		crossenc.Model(t, dir, g.Activation)
		c, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		q, p := make([]string, len(g.Pairs)), make([]string, len(g.Pairs))
		for i, pr := range g.Pairs {
			q[i], p[i] = pr[0], pr[1]
		}
		got, err := c.Score(context.Background(), q, p)
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for i := range got {
			worst = math.Max(worst, math.Abs(float64(got[i])-g.Scores[i]))
		}
		t.Logf("activation %q: %d pairs, largest difference %.2g", g.Activation, len(got), worst)
		if worst > 1e-5 || len(got) < 20 {
			t.Errorf("activation %q: largest difference %.3g from sentence-transformers (want <= 1e-5)", g.Activation, worst)
		}
	}
}

// TestModelFolders: the folders crossenc writes load as cross-encoders whose head applies the
// activation config.json names: the sigmoid model's score is the sigmoid of the identity
// model's (same weights). They are written where NEEDLE_CE_OUT says (by hand, the input of
// bench/crossencoder_golden.py), else to a temporary folder.
func TestModelFolders(t *testing.T) {
	out := cmp.Or(os.Getenv("NEEDLE_CE_OUT"), t.TempDir())
	scores := map[string][]float32{}
	for name, act := range map[string]string{"identity": "torch.nn.modules.linear.Identity", "sigmoid": ""} {
		dir := filepath.Join(out, name)
		crossenc.Model(t, dir, act)
		c, err := Load(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if scores[name], err = c.Score(context.Background(), []string{"who rode it", "bank"}, []string{"a horse", "a river bank"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range scores["identity"] {
		if want := 1 / (1 + math.Exp(-float64(x))); math.Abs(float64(scores["sigmoid"][i])-want) > 1e-6 {
			t.Errorf("pair %d: sigmoid head %v, sigmoid of the identity head's %v is %v", i, scores["sigmoid"][i], x, want)
		}
	}
}

func TestTruncateLongestFirst(t *testing.T) {
	for _, c := range []struct{ n1, n2, limit, k1, k2 int }{
		{3, 4, 10, 3, 4}, {3, 20, 10, 3, 7}, {20, 3, 10, 7, 3}, {20, 30, 10, 5, 5}, {20, 30, 11, 5, 6}, {30, 20, 11, 6, 5}, {6, 6, 11, 5, 6},
	} {
		if k1, k2 := truncateLongestFirst(c.n1, c.n2, c.limit); k1 != c.k1 || k2 != c.k2 {
			t.Errorf("%d, %d within %d: kept %d, %d, want %d, %d", c.n1, c.n2, c.limit, k1, k2, c.k1, c.k2)
		}
	}
}

// TestHeadErrors: a model without the classification head, or of two labels, fails at load
// with a message naming what is wrong.
func TestHeadErrors(t *testing.T) {
	if _, err := Load(testenv.MiniLMDir(t), Options{}); err == nil || !strings.Contains(err.Error(), "BertForSequenceClassification") {
		t.Errorf("MiniLM (a BertModel): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "ce")
	crossenc.Model(t, dir, "")
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	two := strings.Replace(string(b), `"0": "LABEL_0"`, `"0": "LABEL_0", "1": "LABEL_1"`, 1)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(two), 0o644)
	if _, err := Load(dir, Options{}); err == nil || !strings.Contains(err.Error(), "2 labels") {
		t.Errorf("two labels: %v", err)
	}
}
