// Package synth makes the synthetic inputs of `needle bench`, deterministic for a seed:
// wiki-like JSONL corpora for the docstore benchmarks, rows shaped like wiki-18 (`{"id",
// "contents": "\"Title\"\ntext", "url"}`, ~100-word passages, ~680 bytes a row), and the
// versions of a model that bench weights publishes (model.go, optimizer.go); tests publish
// those too. Inputs only, never a test oracle.
package synth

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
)

// vocabulary: pseudo-words of 1-3 syllables (mean ~5 letters, as English prose); one word
// in 64 ends in a non-ASCII letter, so rows carry some multi-byte UTF-8 as English
// Wikipedia text does (names, places).
var syllables = []string{"an", "ber", "ca", "do", "el", "for", "gi", "har", "in", "jo", "ka", "lin",
	"mo", "nor", "o", "pra", "qu", "ri", "sta", "te", "u", "ver", "wa", "xi", "yo", "ze"}

func vocabulary(r *rand.Rand) [][]byte {
	words := make([][]byte, 4096)
	for i := range words {
		var w []byte
		for range 1 + r.IntN(3) {
			w = append(w, syllables[r.IntN(len(syllables))]...)
		}
		if i%64 == 0 {
			w = append(w, "é"...)
		}
		words[i] = w
	}
	return words
}

// URL is the url of row i of a corpus written by Write: unique per row.
func URL(i int64) string {
	return "https://en.wikipedia.org/w/index.php?title=Synthetic_page_" + strconv.FormatInt(i, 10)
}

// Words is wiki-18's passage length in words.
const Words = 100

// Write writes rows JSONL rows to w. Passages have words ± 10% words (at least 1), titles
// 1-4 words; one in 50 passages quotes its 11th word (escaped \" in JSON).
func Write(w io.Writer, rows int64, words int, seed uint64) error {
	if words < 1 {
		return fmt.Errorf("synth: %d words a passage, want >= 1", words)
	}
	spread := words / 10
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	vocab := vocabulary(r)
	bw := bufio.NewWriterSize(w, 1<<20)
	line := make([]byte, 0, 4096)
	for i := range rows {
		line = append(line[:0], `{"id": "`...)
		line = strconv.AppendInt(line, i, 10)
		line = append(line, `", "contents": "\"`...)
		for t := range 1 + r.IntN(4) {
			if t > 0 {
				line = append(line, ' ')
			}
			word := vocab[r.IntN(len(vocab))]
			c := word[0] // capitalized if ASCII; else the lead byte of a rune, kept
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			line = append(append(line, c), word[1:]...)
		}
		line = append(line, `\"\n`...)
		quoted := r.IntN(50) == 0
		for k := range words - spread + r.IntN(2*spread+1) {
			if k > 0 {
				line = append(line, ' ')
			}
			if quoted && k == 10 {
				line = append(line, `\"`...)
			}
			line = append(line, vocab[r.IntN(len(vocab))]...)
			if quoted && k == 10 {
				line = append(line, `\"`...)
			}
		}
		line = append(line, `", "url": "`...)
		line = append(line, URL(i)...)
		line = append(line, "\"}\n"...)
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes a corpus of rows rows to path and returns its size in bytes.
func WriteFile(path string, rows int64, words int, seed uint64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := Write(f, rows, words, seed); err != nil {
		f.Close()
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// ReadAll reads path sequentially through one 1 MiB buffer and returns the bytes read: the
// baseline a sidecar build (which reads the same way) is compared to.
func ReadAll(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
