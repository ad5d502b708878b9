package bert

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"needle/internal/testenv"
	"needle/kernels/platform/cpu"
	"needle/kernels/retrieval/nn"
)

// readJSONL reads one JSON value per line of testdata/name into a []T.
func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s line %d: %v", name, len(out)+1, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func loadMiniLM(t testing.TB) *Encoder {
	t.Helper()
	e, err := Load(testenv.MiniLMDir(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func dot(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// TestGoldenMiniLM compares needle with sentence-transformers (tools/bert_golden.py) on
// every text, at every SIMD level: cosine >= 0.99999.
func TestGoldenMiniLM(t *testing.T) {
	e := loadMiniLM(t)
	texts := readJSONL[string](t, "golden_texts.jsonl")
	raw, err := os.ReadFile(filepath.Join("testdata", "golden_emb.f32"))
	if err != nil {
		t.Fatal(err)
	}
	H := e.Dim()
	if len(raw) != 4*len(texts)*H {
		t.Fatalf("golden_emb.f32 has %d bytes, want %d texts x %d floats", len(raw), len(texts), H)
	}
	want := make([]float32, len(texts)*H)
	for i := range want {
		want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	long := 0
	for _, s := range texts {
		if len(e.Tokenizer().Encode(s, 0)) > e.Options().MaxLength {
			long++
		}
	}
	if len(texts) < 300 || long < 10 || texts[0] != "" {
		t.Fatalf("golden set too weak: %d texts, %d past max length, first %q", len(texts), long, texts[0])
	}
	for _, level := range cpu.Levels() {
		e.ops = nn.New(level)
		got, err := e.Encode(texts, "")
		if err != nil {
			t.Fatal(err)
		}
		worst, at := 2.0, -1
		for i := range texts {
			if c := dot(got[i*H:(i+1)*H], want[i*H:(i+1)*H]); c < worst {
				worst, at = c, i
			}
		}
		t.Logf("%s: min cosine %.8f over %d texts (%d truncated)", level, worst, len(texts), long)
		if worst < 0.99999 {
			t.Errorf("%s: text %d %q: cosine %.8f < 0.99999", level, at, texts[at], worst)
		}
	}
}

// TestWordNetTop10 checks the top-10 neighbours of 100 queries over 2,000 WordNet glosses
// against the reference. A neighbour may differ only where the reference itself has a
// near-tie: needle's row at rank r must have a reference score within 1e-5 of the
// reference's rank-r score.
func TestWordNetTop10(t *testing.T) {
	e := loadMiniLM(t)
	type row struct{ Contents string }
	corpus := readJSONL[row](t, "wordnet_corpus.jsonl")
	queries := readJSONL[string](t, "wordnet_queries.jsonl")
	var top []struct {
		IDs    []int
		Scores []float64
	}
	b, err := os.ReadFile(filepath.Join("testdata", "wordnet_top.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &top); err != nil || len(top) != len(queries) {
		t.Fatalf("wordnet_top.json: %v (%d entries for %d queries)", err, len(top), len(queries))
	}
	texts := make([]string, len(corpus))
	for i, r := range corpus {
		texts[i] = r.Contents
	}
	cemb, err := e.Encode(texts, "")
	if err != nil {
		t.Fatal(err)
	}
	qemb, err := e.Encode(queries, "")
	if err != nil {
		t.Fatal(err)
	}
	H, ties := e.Dim(), 0
	for q := range queries {
		refScore := map[int]float64{}
		for i, id := range top[q].IDs {
			refScore[id] = top[q].Scores[i]
		}
		got := topK(qemb[q*H:(q+1)*H], cemb, H, 10)
		for r, id := range got {
			if id == top[q].IDs[r] {
				continue
			}
			s, ok := refScore[id]
			if !ok || math.Abs(s-top[q].Scores[r]) > 1e-5 {
				t.Errorf("query %d %q rank %d: needle row %d, reference row %d (scores %v)", q, queries[q], r, id, top[q].IDs[r], top[q].Scores[:11])
				break
			}
			ties++
		}
	}
	t.Logf("%d queries x top-10 match (%d rank swaps inside reference near-ties)", len(queries), ties)
}

// topK returns the rows of corpus (n x H) with the k largest inner products with q, best first.
func topK(q, corpus []float32, H, k int) []int {
	var ids []int
	var scores []float64
	for i := 0; i < len(corpus)/H; i++ {
		s := dot(q, corpus[i*H:(i+1)*H])
		pos := len(ids)
		for pos > 0 && scores[pos-1] < s {
			pos--
		}
		if pos < k {
			ids = append(ids[:pos], append([]int{i}, ids[pos:]...)...)
			scores = append(scores[:pos], append([]float64{s}, scores[pos:]...)...)
			if len(ids) > k {
				ids, scores = ids[:k], scores[:k]
			}
		}
	}
	return ids
}
