package server

import "testing"

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
// The fake corpus allocates one copy per Row (the docstore returns mmap views: none).
func BenchmarkAppendRetrieveResult(b *testing.B) {
	s, _, _ := testServer(b, Config{}, false)
	r := s.retriever.Load()
	const n, k = 2560, 3
	res := &searchResult{dist: make([]float32, n*k), labels: make([]int64, n*k)}
	for i := range res.labels {
		res.labels[i], res.dist[i] = int64(i%50), 0.5
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, _, err = appendRetrieveResult(buf[:0], r.Docs, n, k, res, true)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}
