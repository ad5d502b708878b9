package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"needle/testkit/testenv"
)

func TestParseLine(t *testing.T) {
	line := `00002312 00 s 02 abaxial(a) 0 dorsal_side 4 002 ;c 06037666 n 0000 ! 00002527 a 0101 | facing away from the axis; of an organ; "the abaxial surface of a leaf"; "to be, or not to be" - Shakespeare  `
	s, ok, err := ParseLine(line)
	if err != nil || !ok {
		t.Fatalf("ParseLine: ok %v err %v", ok, err)
	}
	want := Synset{
		Key:         "a00002312",
		Lemmas:      []string{"abaxial", "dorsal side"},
		Definitions: []string{"facing away from the axis", "of an organ"},
		Examples:    []string{"the abaxial surface of a leaf", "to be, or not to be"},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if got := s.Contents(); got != "\"abaxial, dorsal side\"\nfacing away from the axis; of an organ" {
		t.Fatalf("Contents() = %q", got)
	}
	if _, ok, err := ParseLine("  1 This software and database is being provided"); ok || err != nil {
		t.Fatalf("license line: ok %v err %v", ok, err)
	}
	for _, bad := range []string{
		"00001740 03 n 01 entity 0 003", // no gloss
		"0000x740 03 n 01 entity 0 | g", // bad offset
		"00001740 03 n zz entity 0 | g", // bad word count
		"00001740 03 n 03 entity 0 | g", // too few words
		"00001740 03 | g",               // short header
	} {
		if _, _, err := ParseLine(bad); err == nil {
			t.Errorf("ParseLine(%q) accepted a bad line", bad)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add(`00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived; "an example"`)
	f.Add(`00001740 00 a 01 able(p) 0 000 | ; ""; "`)
	f.Add(`1 2 3 ff | x`)
	f.Fuzz(func(t *testing.T, line string) {
		s, ok, err := ParseLine(line)
		if err == nil && ok && len(s.Lemmas) == 0 {
			t.Fatalf("accepted a synset without lemmas: %q", line)
		}
	})
}

func TestSpread(t *testing.T) {
	all := make([]Synset, 10)
	for i := range all {
		all[i].Key = string(rune('a' + i))
	}
	var keys []string
	for _, s := range Spread(all, 4) {
		keys = append(keys, s.Key)
	}
	if got := strings.Join(keys, ""); got != "acfh" {
		t.Fatalf("Spread(10, 4) keys %q, want acfh", got)
	}
	if len(Spread(all, 0)) != 10 || len(Spread(all, 11)) != 10 {
		t.Fatal("Spread with no limit must keep everything")
	}
}

// The real Debian database: every synset parses, and the files written are consistent.
func TestRealWordNet(t *testing.T) {
	dict := testenv.WordNetDir(t)
	all, err := ReadDict(dict)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 117659 { // WordNet 3.0: 82115 nouns + 13767 verbs + 18156 adjectives + 3621 adverbs
		t.Fatalf("%d synsets, want 117659", len(all))
	}
	out := t.TempDir()
	if err := run([]string{"--dict", dict, "--out", out, "--limit", "500"}); err != nil {
		t.Fatal(err)
	}
	corpusPath := filepath.Join(out, "corpus.jsonl")
	before, _ := os.Stat(corpusPath)
	if err := run([]string{"--dict", dict, "--out", out, "--limit", "500"}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(corpusPath); !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("an identical rerun rewrote corpus.jsonl (new mtime)")
	}
	var rows []corpusRow
	readJSONL(t, filepath.Join(out, "corpus.jsonl"), func(b []byte) {
		var r corpusRow
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	})
	if len(rows) != 500 || rows[7].ID != "7" || !strings.HasPrefix(rows[0].Contents, "\"entity\"\n") {
		t.Fatalf("corpus: %d rows, row 7 id %q, row 0 %q", len(rows), rows[7].ID, rows[0].Contents)
	}
	n := 0
	readJSONL(t, filepath.Join(out, "queries.jsonl"), func(b []byte) {
		var q Query
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		if q.Gold < 0 || q.Gold >= int64(len(rows)) || rows[q.Gold].Synset != q.Synset || q.Query == "" {
			t.Fatalf("query %+v does not point at its synset's row", q)
		}
		n++
	})
	if n < 100 {
		t.Fatalf("%d queries from 500 synsets, want >= 100", n)
	}
}

func readJSONL(t *testing.T, path string, line func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestWikiLike(t *testing.T) {
	all := []Synset{
		{Key: "n1", Lemmas: []string{"cat"}, Definitions: []string{"a small feline"}, Examples: []string{"the cat sat"}},
		{Key: "n2", Lemmas: []string{"dog"}, Definitions: []string{"a loyal canine friend"}},
	}
	got := WikiLike(all, 3, 8)
	want := []passage{
		{"\"cat\"\na small feline. the cat sat. a loyal canine friend.", "n1"},
		{"\"cat\"\na small feline. the cat sat. a loyal canine friend.", "n1"},
		{"\"cat\"\na small feline. the cat sat. a loyal canine friend.", "n1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WikiLike = %q", got)
	}
	if got := WikiLike(all, 2, 3); got[1].synset != "n2" || !strings.HasPrefix(got[1].contents, "\"dog\"\n") {
		t.Fatalf("second passage %q, want it to start at the next synset", got[1])
	}
}
