package server

import (
	"errors"
	"slices"
	"testing"
)

// TestParseRerankRetrieve: Search-R1's SearchRequest defaults (topk_retrieval 10,
// topk_rerank 3), null topk_rerank keeping all, null or 0 topk_retrieval the server's topk.
func TestParseRerankRetrieve(t *testing.T) {
	for _, c := range []struct {
		body                string
		retrieval, reranked int
		scores              bool
	}{
		{`{"queries":["q"]}`, 10, 3, false},
		{`{"queries":["q"],"topk_retrieval":20,"topk_rerank":5,"return_scores":true}`, 20, 5, true},
		{`{"queries":["q"],"topk_retrieval":null,"topk_rerank":null}`, 7, -1, false},
		{`{"queries":["q"],"topk_retrieval":0,"topk_rerank":0}`, 7, 0, false},
	} {
		r, err := parseRerankRetrieve(nil, []byte(c.body), 8, 7)
		if err != nil || r.TopKRetrieval != c.retrieval || r.TopKRerank != c.reranked || r.ReturnScores != c.scores {
			t.Errorf("%s: %+v, %v", c.body, r, err)
		}
	}
	for _, body := range []string{`{"queries":["q"],"topk_rerank":-1}`, `{"topk_rerank":2}`, `{"queries":["q"],"topk_retrieval":"x"}`} {
		var v *validationError
		if _, err := parseRerankRetrieve(nil, []byte(body), 8, 7); !errors.As(err, &v) {
			t.Errorf("%s: %v, want a 422", body, err)
		}
	}
}

func TestParseRerank(t *testing.T) {
	r, err := parseRerank(nil, []byte(`{"queries":["q","p"],"documents":[[{"document":{"contents":"\"T\"\nx"}}],[{"contents":"y"},{"contents":"\"U\"\nz\nw"}]]}`), 8)
	if err != nil || r.TopK != 3 || !slices.Equal(r.Passages[0], []string{`(Title: "T") x`}) ||
		!slices.Equal(r.Passages[1], []string{"(Title: y) ", "(Title: \"U\") z\nw"}) {
		t.Errorf("%+v, %v", r, err)
	}
	for _, body := range []string{`{"queries":["q"]}`, `{"queries":["q"],"documents":[]}`, `{"queries":["q"],"documents":[[{}]]}`,
		`{"queries":["q"],"documents":[["x"]]}`, `{"queries":["q"],"documents":[[]],"rerank_topk":"a"}`} {
		var v *validationError
		if _, err := parseRerank(nil, []byte(body), 8); !errors.As(err, &v) {
			t.Errorf("%s: %v, want a 422", body, err)
		}
	}
}

// FuzzParseRerank: any body parses or is a 422 (or the unparsable-body 400), never a panic;
// a parsed request has one passage list per query.
func FuzzParseRerank(f *testing.F) {
	for _, s := range []string{`{"queries":["q"],"documents":[[{"contents":"a"}]],"rerank_topk":2,"return_scores":true}`,
		`{"queries":["q"],"documents":[[{"document":{"contents":"a"}}]]}`, `{"queries":[],"documents":[]}`, `{}`, `[]`, `x`,
		`{"queries":["q"],"documents":[[{"document":null,"contents":"a"}]]}`, `{"queries":["q"],"documents":[[{"document":{}}]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseRerank(nil, body, 8)
		var v *validationError
		switch {
		case err == nil && len(r.Passages) != len(r.Queries):
			t.Fatalf("%q: %d queries, %d passage lists", body, len(r.Queries), len(r.Passages))
		case err == nil && r.TopK <= 0:
			t.Fatalf("%q: topk %d", body, r.TopK)
		case err != nil && !errors.As(err, &v) && !errors.Is(err, errUnparsableBody):
			t.Fatalf("%q: %v", body, err)
		}
	})
}

func FuzzParseRerankRetrieve(f *testing.F) {
	for _, s := range []string{`{"queries":["q"],"topk_retrieval":5,"topk_rerank":2}`, `{"queries":["q"],"topk_rerank":null}`, `{"queries":[1]}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := parseRerankRetrieve(nil, body, 8, 3)
		var v *validationError
		switch {
		case err == nil && (r.TopKRetrieval <= 0 || r.TopKRerank < -1):
			t.Fatalf("%q: %+v", body, r)
		case err != nil && !errors.As(err, &v) && !errors.Is(err, errUnparsableBody):
			t.Fatalf("%q: %v", body, err)
		}
	})
}
