package e2e

import (
	"path/filepath"
	"slices"
	"testing"

	"needle/testkit/milvustest"
)

// TestServeMilvusTwoServersOneAddressFolder: the fixture's index built into a real Milvus
// (FLAT: exact), then two `needle serve --milvus` processes over that one collection register in
// one address folder, as several rollout nodes would. Search-R1's client on each server gets the
// direct faissgo search's rows and scores, and ASearcher's pattern, which picks a server from
// the folder, gets the right rows and pages.
func TestServeMilvusTwoServersOneAddressFolder(t *testing.T) {
	fx := newFixture(t)
	mv := milvustest.Start(t)
	run(t, fx.bin, "build", "--milvus", mv.Addr, "--collection", "e2e", "--corpus", fx.corpus,
		"--embeddings", filepath.Join(fx.index, "index.faiss"), "--milvus-index", "FLAT")

	addrDir := filepath.Join(t.TempDir(), "addresses")
	var servers []*server
	for range 2 {
		servers = append(servers, fx.launch(t, addrDir, 0, "--milvus", mv.Addr, "--collection", "e2e",
			"--pages_path", fx.pages, "--topk", "3"))
	}
	files, err := filepath.Glob(filepath.Join(addrDir, "Host*_IP*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		s.waitReady(t)
		if !slices.Contains(files, s.addressFile) {
			t.Fatalf("address folder holds %v, not %s", files, s.addressFile)
		}
		if b := s.metric(t, `needle_index_backend{backend="milvus"}`); b != "1" {
			t.Fatalf("%s does not search Milvus (needle_index_backend{backend=\"milvus\"} = %q)\n%s", s.addr, b, s.log)
		}
	}
	if len(files) != 2 {
		t.Fatalf("address folder holds %v, want the two servers' files", files)
	}

	queries := fx.queries[:40]
	for _, s := range servers {
		var result [][]scored
		python(t, &result, "searchr1.py", "http://"+s.addr, writeJSON(t, queries), "3")
		checkScoredLists(t, fx, queries, result, 3)
	}
	fx.checkASearcher(t, addrDir)
	for _, s := range servers {
		s.stop(t)
	}
}
