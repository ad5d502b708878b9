package server

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"needle/engine"
	"needle/engine/docstore"
)

// appendRetrieveResult appends the /retrieve response for n queries with k hits each to
// dst. Corpus rows are JSON objects already (validated by the docstore) and are copied
// as they are. Hits labeled -1 (fewer than k rows found) and bad corpus rows (not a JSON
// object with a string contents; `needle build` indexed them as empty text) are left out
// rather than failing every query of the request; skipped counts the bad rows. Compact
// separators, as FastAPI's JSONResponse writes them. The rows are views into the corpus
// mapping: a fault while copying them (the file truncated after Row read the line) is an
// error wrapping docstore.ErrChanged, as it is in Row.
func appendRetrieveResult(dst []byte, docs engine.DocStore, n, k int, res *searchResult, withScores bool) (out []byte, skipped int, err error) {
	if ferr := docstore.CatchFault(func() { out, skipped, err = appendHits(dst, docs, n, k, res, withScores) }); ferr != nil {
		return dst, skipped, ferr
	}
	return out, skipped, err
}

func appendHits(dst []byte, docs engine.DocStore, n, k int, res *searchResult, withScores bool) (out []byte, skipped int, err error) {
	dst = append(dst, `{"result":[`...)
	for q := range n {
		if q > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		first := true
		for j := q * k; j < (q+1)*k; j++ {
			label := res.labels[j]
			if label < 0 {
				continue
			}
			row, err := docs.Row(label)
			if err != nil {
				if isBadRow(err) {
					skipped++
					continue
				}
				return dst, skipped, fmt.Errorf("corpus row %d: %w", label, err)
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			if withScores {
				dst = append(dst, `{"document":`...)
				dst = append(dst, row...)
				dst = append(dst, `,"score":`...)
				dst = appendScore(dst, res.dist[j])
				dst = append(dst, '}')
			} else {
				dst = append(dst, row...)
			}
		}
		dst = append(dst, ']')
	}
	return append(dst, "]}"...), skipped, nil
}

// appendAccessResult appends the /access response for urls to dst: each url's page row,
// or null. The rows are views into the pages file's mapping: a fault while reading them
// (the file truncated under it) is an error wrapping docstore.ErrChanged.
func appendAccessResult(dst []byte, pages engine.PageStore, urls []string) ([]byte, error) {
	out := append(dst, `{"result":[`...)
	err := docstore.CatchFault(func() {
		for i, u := range urls {
			if i > 0 {
				out = append(out, ',')
			}
			if row, ok := pages.Lookup(u); ok {
				out = append(out, row...)
			} else {
				out = append(out, "null"...)
			}
		}
	})
	if err != nil {
		return dst, err
	}
	return append(out, "]}"...), nil
}

// isBadRow tells a bad corpus line (skipped) from a failure to read the corpus. It is a
// function of its own so the errors.As target escapes to the heap only on this rare path.
func isBadRow(err error) bool {
	var bad *docstore.BadRowError
	return errors.As(err, &bad)
}

// appendScore appends f as Python's json module writes float(f) (repr of the float64
// value of the float32, as the anchor's numpy .tolist() produces): shortest round-trip
// digits, "1.0" not "1", exponent form outside [1e-4, 1e16). NaN and ±Inf are not JSON
// and become null.
func appendScore(dst []byte, f float32) []byte {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(dst, "null"...)
	}
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.AppendFloat(dst, v, 'e', -1, 64)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'f', -1, 64)
	for _, c := range dst[start:] {
		if c == '.' {
			return dst
		}
	}
	return append(dst, ".0"...)
}
