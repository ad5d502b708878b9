package server

import (
	"math"
	"strconv"

	"needle/engine"
)

// appendRetrieveResult appends the /retrieve response to dst: one list per query of its
// hits, best first; with scores each hit is {"document": <row>, "score": s}, else the row
// itself. Corpus rows are JSON objects already (validated by the docstore) and are copied as
// they are. Compact separators, as FastAPI's JSONResponse writes them.
func appendRetrieveResult(dst []byte, hits [][]engine.Hit, withScores bool) []byte {
	dst = append(dst, `{"result":[`...)
	for q, query := range hits {
		if q > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, h := range query {
			if j > 0 {
				dst = append(dst, ',')
			}
			if withScores {
				dst = append(dst, `{"document":`...)
				dst = append(dst, h.Row...)
				dst = append(dst, `,"score":`...)
				dst = appendScore(dst, h.Score)
				dst = append(dst, '}')
			} else {
				dst = append(dst, h.Row...)
			}
		}
		dst = append(dst, ']')
	}
	return append(dst, "]}"...)
}

// appendAccessResult appends the /access response to dst: each url's page row, or null.
func appendAccessResult(dst []byte, rows [][]byte) []byte {
	dst = append(dst, `{"result":[`...)
	for i, row := range rows {
		if i > 0 {
			dst = append(dst, ',')
		}
		if row == nil {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, row...)
		}
	}
	return append(dst, "]}"...)
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
