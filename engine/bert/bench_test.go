package bert

import "testing"

// BenchmarkEncodeGlosses encodes 256 WordNet glosses (short passages) per iteration.
func BenchmarkEncodeGlosses(b *testing.B) {
	e := loadMiniLM(b)
	type row struct{ Contents string }
	corpus := readJSONL[row](b, "wordnet_corpus.jsonl")[:256]
	texts := make([]string, len(corpus))
	for i, r := range corpus {
		texts[i] = r.Contents
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Encode(texts, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(texts))/b.Elapsed().Seconds(), "texts/s")
}

// BenchmarkEncodeQuery encodes one short query per iteration: the serve path's latency.
func BenchmarkEncodeQuery(b *testing.B) {
	e := loadMiniLM(b)
	for b.Loop() {
		if _, err := e.Encode([]string{"a member of the genus Canis that has been domesticated"}, "query: "); err != nil {
			b.Fatal(err)
		}
	}
}
