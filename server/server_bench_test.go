package server

import (
	"testing"

	"needle/engine"
)

// BenchmarkRetrieveSingleQuery is the server's own cost per ASearcher/verl-style request
// (parse, batcher round trip, row copy, JSON) around a cheap fake encoder and index.
func BenchmarkRetrieveSingleQuery(b *testing.B) {
	s, _, _ := testServer(b, Config{}, false)
	body := `{"queries":["topic1 word3"],"topk":3,"return_scores":true}`
	b.ReportAllocs()
	for b.Loop() {
		if code, out, _ := do(s, "POST", "/retrieve", body); code != 200 {
			b.Fatalf("%d %s", code, out)
		}
	}
}

// BenchmarkAppendRetrieveResult is the response encoding of a 2,560-query Search-R1 POST.
func BenchmarkAppendRetrieveResult(b *testing.B) {
	_, docs, _ := testParts()
	const n, k = 2560, 3
	hits := make([][]engine.Hit, n)
	for q := range hits {
		for j := range k {
			row, _ := docs.Row(int64((q*k + j) % 50))
			hits[q] = append(hits[q], engine.Hit{Row: row, Score: 0.5})
		}
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendRetrieveResult(buf[:0], hits, true)
	}
	b.SetBytes(int64(len(buf)))
}
