package indexbuild

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The corpus hash of the up-to-date check, streamed from a file in the page cache: xxh64
// (what new manifests record) against xxh64 + sha256 (what a manifest of an older build
// costs to check).
func BenchmarkHashCorpus(b *testing.B) {
	path := filepath.Join(b.TempDir(), "corpus.jsonl")
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, recorded string }{{"xxh64", hashXXH64}, {"xxh64+sha256", hashSHA256}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, _, err := hashCorpus(path, tc.recorded, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
