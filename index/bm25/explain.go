package bm25

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"
)

// Explanation is one row's BM25 score for a query taken apart, as Lucene's
// IndexSearcher.explain shows it: the score is the sum of one TermScore per query term the row
// holds, each weight - weight / (1 + freq * normInverse) (termScore), which is
// idf * count * freq / (freq + k1 * (1 - b + b * length / avgdl)) up to float32 rounding.
type Explanation struct {
	Row    int64   `json:"row"`
	ID     string  `json:"id"`
	Length uint32  `json:"length"` // the row's term count as the index keeps it: Lucene's length byte (exact below 24 terms)
	AvgDL  float32 `json:"avgdl"`  // the average length over rows with a term
	K1     float32 `json:"k1"`
	B      float32 `json:"b"`
	// NormInverse is 1 / (k1 ((1-b) + b length/avgdl)), as Lucene caches it per length byte.
	NormInverse float32     `json:"norm_inverse"`
	Terms       []TermScore `json:"terms"` // the query's terms in the order the analyzer gives them
	// Score is the terms' scores summed in float64 and rounded to float32, as Search sums them
	// (in another order: float32 terms add exactly in float64 whatever the order while they lie
	// within about 2^(29 - log2 terms) of each other, as the term scores of the parity queries
	// do; TestExplainSumsToTheSearchScore checks the bits).
	Score float32 `json:"score"`
	// Reported is Score rounded to 4 decimals, what Search returns for the row unless it ties
	// with the hit ranked above it (adjustTies lowers a tie by 1e-6 per place).
	Reported float32 `json:"reported"`
}

// TermScore is one query term's part of a row's score. A term of the query that the index or
// the row lacks has Freq 0 and Score 0.
type TermScore struct {
	Term   string  `json:"term"`
	Count  int     `json:"count"` // times in the query: its weight is Count * IDF
	DF     uint64  `json:"df"`    // rows that hold the term
	IDF    float32 `json:"idf"`   // log(1 + (docCount - df + 0.5) / (df + 0.5))
	Freq   uint64  `json:"freq"`  // times in the row
	Impact float32 `json:"impact"`
	Score  float32 `json:"score"`
}

// Explain takes apart the score of the row whose corpus id is id for query, as Search
// computes it. The id is found by a scan of the ids (a diagnostic, not a serving path).
func (x *Index) Explain(query, id string) (*Explanation, error) {
	row := int64(-1)
	for r := range x.meta.Rows {
		if bytes.Equal(x.id(r), []byte(id)) {
			row = r
			break
		}
	}
	if row < 0 {
		return nil, fmt.Errorf("bm25: no row has id %q", id)
	}
	return x.explainRow(query, row), nil
}

// explainRow is Explain of a row by its number.
func (x *Index) explainRow(query string, row int64) *Explanation {
	norm := x.norms[row]
	e := &Explanation{
		Row: row, ID: string(x.id(row)), Length: byteToLength(norm), K1: x.k1, B: x.b,
		AvgDL:       float32(float64(x.meta.SumTotalTermFreq) / float64(max(x.meta.DocCount, 1))),
		NormInverse: x.normInverse[norm],
	}
	var terms bag
	terms.reset()
	var a Analyzer
	a.Terms(query, func(t []byte) { terms.add(t, maxClauses) })
	var sum float64
	for i := range terms.len() {
		t := TermScore{Term: string(terms.term(i)), Count: int(terms.counts[i])}
		df, post, blocks := x.lookup(terms.term(i))
		if df > 0 {
			t.DF, t.IDF = df, x.idf(df)
			c := newCursor(post, blocks, float32(t.Count)*t.IDF, x)
			if c.advance(row) == row {
				t.Freq, t.Impact = c.freq, impact(c.freq, e.NormInverse)
				t.Score = c.score(x, row)
				sum += float64(t.Score)
			}
		}
		e.Terms = append(e.Terms, t)
	}
	e.Score = float32(sum)
	e.Reported = float32(float64(javaRound(float64(e.Score)*10000)) / 10000)
	return e
}

// WriteText writes e for a person: the score, the row's length parts, and a table of the
// terms' parts.
func (e *Explanation) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "row %d (id %q): score %v, reported %v (rounded to 4 decimals)\n", e.Row, e.ID, e.Score, e.Reported)
	fmt.Fprintf(w, "= the sum over query terms of count * idf * freq / (freq + k1 (1 - b + b length/avgdl)),\n")
	fmt.Fprintf(w, "  length %d, avgdl %v, k1 %v, b %v: 1 / (k1 (1 - b + b length/avgdl)) = %v\n\n", e.Length, e.AvgDL, e.K1, e.B, e.NormInverse)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "term\tcount\tdf\tidf\tfreq\tscore\t")
	for _, t := range e.Terms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%d\t%v\t\n", t.Term, t.Count, t.DF, t.IDF, t.Freq, t.Score)
	}
	return tw.Flush()
}
