package server

import (
	"fmt"
	"math"
	"strconv"

	"needle/engine"
)

// appendRetrieveResult appends the /retrieve response for n queries with k hits each to
// dst. Corpus rows are JSON objects already (validated by the docstore) and are copied
// as they are; hits labeled -1 (fewer than k rows found) are left out. Compact
// separators, as FastAPI's JSONResponse writes them.
func appendRetrieveResult(dst []byte, docs engine.DocStore, n, k int, res *searchResult, withScores bool) ([]byte, error) {
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
				return dst, fmt.Errorf("corpus row %d: %w", label, err)
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
	return append(dst, "]}"...), nil
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
