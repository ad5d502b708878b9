package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"needle/encoder/bert"
	"needle/testkit/testenv"
)

// TestEncodeDump checks the texts the benchmark encodes, written by --dump (no model needed).
func TestEncodeDump(t *testing.T) {
	wordnet := filepath.Join(testenv.WordNetDir(t), "data.noun")
	dump := filepath.Join(t.TempDir(), "texts.json")
	opt := EncodeOptions{Shape: "both", Passages: 20, Queries: 5, BatchSize: 64, Threads: 1, Repeat: 1, WordNet: wordnet, Dump: dump}
	if err := Encode(&bytes.Buffer{}, opt); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	var texts benchTexts
	if err := json.Unmarshal(b, &texts); err != nil {
		t.Fatal(err)
	}
	if len(texts.Passages) != 20 || len(texts.Queries) != 5 {
		t.Fatalf("%d passages, %d queries, want 20, 5", len(texts.Passages), len(texts.Queries))
	}
	for i, p := range texts.Passages {
		title, body, ok := strings.Cut(p, "\n")
		if _, err := strconv.Unquote(title); !ok || err != nil || body == "" {
			t.Errorf("passage %d is not \"Title\"\\ntext: %q", i, p)
		}
	}
	for i, q := range texts.Queries {
		if q == "" || strings.Contains(q, ";") {
			t.Errorf("query %d: %q, want one definition", i, q)
		}
	}
}

func TestEncodeReport(t *testing.T) {
	model := testenv.MiniLMDir(t)
	wordnet := filepath.Join(testenv.WordNetDir(t), "data.noun")
	var out bytes.Buffer
	opt := EncodeOptions{Model: model, Shape: "minilm", Passages: 8, Queries: 4, BatchSize: 4, Threads: 1, Repeat: 1, WordNet: wordnet, JSON: true,
		Precisions: []bert.Precision{bert.FP16, bert.Int8}}
	if err := Encode(&out, opt); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		SIMD      string         `json:"simd"`
		Threads   int            `json:"threads"`
		BatchSize int            `json:"batch_size"`
		Results   []encodeResult `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.SIMD == "" || rep.Threads != 1 || rep.BatchSize != 4 || len(rep.Results) != 2 {
		t.Fatalf("report: %s", out.String())
	}
	for i, r := range rep.Results {
		// 8 passages of one or more glosses have over 80 tokens; MiniLM's weights are 20-200 MB
		// (fp16 about 45 of them, int8 half that).
		if r.Model != "all-MiniLM-L6-v2" || r.Precision != string(opt.Precisions[i]) || r.Passages != 8 || r.Tokens < 80 ||
			r.PassagesPerSec <= 0 || r.PassagesPerCPUs <= 0 || r.TokensPerSec <= r.PassagesPerSec || r.QueryMedianMs <= 0 ||
			r.QueryP90Ms < r.QueryMedianMs || r.WeightsMB < 20 || r.WeightsMB > 200 || r.PeakRSSMB <= 0 || r.ModelGOPs <= 0 {
			t.Errorf("result: %+v", r)
		}
		if vector := rep.SIMD != "ref"; vector != (r.PeakGOPs > 0 && r.PeakShare > 0) {
			t.Errorf("SIMD %s: peak %g GOP/s, share %g", rep.SIMD, r.PeakGOPs, r.PeakShare)
		}
	}
	if rep.Results[1].WeightsMB >= rep.Results[0].WeightsMB {
		t.Errorf("int8 weights %g MB, fp16 %g MB", rep.Results[1].WeightsMB, rep.Results[0].WeightsMB)
	}
}

func TestEncodeBadOptions(t *testing.T) {
	for _, tc := range []struct {
		opt  EncodeOptions
		want string
	}{
		{EncodeOptions{Passages: 1, Queries: 1, BatchSize: 1, Threads: 1, Repeat: 0, Model: "m"}, "Repeat: 0, want > 0"},
		{EncodeOptions{Passages: 1, Queries: 1, BatchSize: 1, Threads: 1, Repeat: 1}, "Model: required"},
		{EncodeOptions{Passages: 1, Queries: 1, BatchSize: 1, Threads: 1, Repeat: 1, Model: "m", WordNet: "/nonexistent"}, "wordnet-base provides it"},
	} {
		if err := Encode(&bytes.Buffer{}, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.opt, err, tc.want)
		}
	}
}

// TestEncodeTextsWrap: more passages than WordNet's glosses make start over from the first
// gloss (the GPU runs of 200,000), and the queries stay after every passage's glosses.
func TestEncodeTextsWrap(t *testing.T) {
	texts, err := wordnetBenchTexts(filepath.Join(testenv.WordNetDir(t), "data.noun"), 30000, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(texts.Passages) != 30000 || len(texts.Queries) != 5 {
		t.Fatalf("%d passages, %d queries", len(texts.Passages), len(texts.Queries))
	}
	title := func(p string) string { t, _, _ := strings.Cut(p, "\n"); return t }
	again := slices.IndexFunc(texts.Passages[1:], func(p string) bool { return title(p) == title(texts.Passages[0]) }) + 1
	if again < 1000 || !strings.HasPrefix(texts.Passages[0][len(title(texts.Passages[0])):], "\n"+strings.SplitN(texts.Passages[again], "\n", 2)[1][:10]) {
		t.Errorf("passages start over at %d, want after a full pass of the glosses, from the first gloss", again)
	}
}
