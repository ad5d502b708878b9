package bert

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"needle/kernels/bert/nn"
	"needle/platform/cpu"
	"needle/testkit/testenv"
)

// TestBatchInvariant: a query's embedding is the same bits encoded alone, among 60 random
// others, or in a 2,560-query batch (the size of Search-R1's one POST per turn), at every
// precision and SIMD level this CPU runs, whatever BLAS core type the process was started
// with (the encoder calls no BLAS). The 2,560-query batch runs at the selected level only, and
// the scalar reference level (the oracle, about 50x slower) encodes the short probes among 12
// others: a text past the max length pads the whole batch to 256 tokens there, which took most
// of this test's minutes; the other levels keep it.
func TestBatchInvariant(t *testing.T) {
	golden := testenv.ReadJSONL[string](t, "testdata/golden_texts.jsonl")
	r := rand.New(rand.NewSource(26))
	// Query-like texts: the first 2 to 12 words of golden texts, with a serial.
	query := func(i int) string {
		words := strings.Fields(golden[r.Intn(len(golden))])
		return fmt.Sprintf("%s %d", strings.Join(words[:min(len(words), 2+r.Intn(11))], " "), i)
	}
	pool := make([]string, 2560-4)
	for i := range pool {
		pool[i] = query(i)
	}
	// The empty text, a question, a text past the max length, a query like the others.
	probes := []string{"", "who wrote the odyssey", golden[len(golden)-1], query(-1)}
	selected, err := cpu.Selected()
	if err != nil {
		t.Fatal(err)
	}
	for _, prec := range []Precision{FP16, Int8, BF16} {
		if prec.runsOn(nn.New(selected)) != nil {
			t.Logf("%s: not at %s", prec, selected)
			continue
		}
		e := loadMiniLMAt(t, prec)
		for _, level := range cpu.Levels() {
			e.ops = nn.New(level)
			if prec.runsOn(e.ops) != nil {
				continue
			}
			levelProbes := probes
			batches := map[string][]string{"60 others": withProbes(r, pool[:60], probes)}
			if level == cpu.Ref {
				levelProbes = []string{probes[0], probes[1], probes[3]}
				batches = map[string][]string{"12 others": withProbes(r, pool[:12], levelProbes)}
			}
			if level == selected {
				batches["2,560 queries"] = withProbes(r, pool, probes)
			}
			for name, batch := range batches {
				vecs, err := e.Encode(batch, "query: ")
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range levelProbes {
					alone, err := e.Encode([]string{p}, "query: ")
					if err != nil {
						t.Fatal(err)
					}
					at := indexOf(batch, p) * e.Dim()
					for i, v := range alone {
						if got := vecs[at+i]; math.Float32bits(got) != math.Float32bits(v) {
							t.Fatalf("%s %s: query %.40q, float %d: %g in a batch of %s, %g alone", prec, level, p, i, got, name, v)
						}
					}
				}
			}
			t.Logf("%s %s: %d queries the same bits alone and in batches", prec, level, len(levelProbes))
		}
	}
}

// withProbes returns others shuffled with the probes at random places.
func withProbes(r *rand.Rand, others, probes []string) []string {
	out := append(append([]string(nil), others...), probes...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func indexOf(texts []string, p string) int {
	for i, s := range texts {
		if s == p {
			return i
		}
	}
	return -1
}
