package bm25

import "math"

// adjustTies does to scores, ranked best first, what Anserini's ScoreTiesAdjusterReranker does
// to pyserini's hits, step for step as the class in pyserini 0.22.1's Anserini jar runs it:
// each score is rounded to 4 decimals in double (Math.round(score * 10000.0) / 10000.0, then
// to float); a score whose predecessor, already adjusted, is at most 1e-4f above it (float
// subtraction) is a tie, and the n-th tie in a row is lowered by 1e-6f * n in float. The
// conversions round every step as Java does and keep Go from fusing multiply and subtract.
func adjustTies(scores []float32) {
	dup := 0
	for i, s := range scores {
		s = float32(float64(javaRound(float64(s)*10000)) / 10000)
		if i == 0 || float32(scores[i-1]-s) > 1e-4 {
			dup = 0
		} else {
			dup++
			s -= float32(1e-6 * float32(dup))
		}
		scores[i] = s
	}
}

// javaRound is Java's Math.round(double): floor(x + 1/2) without rounding x + 1/2.
func javaRound(x float64) int64 {
	f := math.Floor(x)
	if x-f >= 0.5 {
		f++
	}
	return int64(f)
}
