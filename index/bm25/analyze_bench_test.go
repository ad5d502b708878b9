package bm25

import (
	"os"
	"testing"
)

// BenchmarkAnalyze: the analyzer over the parity corpus's passages (bytes/s of text).
func BenchmarkAnalyze(b *testing.B) {
	text, err := os.ReadFile("testdata/corpus.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var a Analyzer
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		a.Terms(string(text), func([]byte) {})
	}
}
