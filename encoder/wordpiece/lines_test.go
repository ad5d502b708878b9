package wordpiece

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"needle/internal/jsonl"
	"needle/testkit/testenv"
)

func loadTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(testenv.MiniLMDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// formatIDs is the expected output line of tokenize for ids.
func formatIDs(ids []int32) string {
	return strings.Trim(fmt.Sprint(ids), "[]") + "\n"
}

func TestWriteIDs(t *testing.T) {
	tok := loadTokenizer(t)
	texts := []string{"Hello, World!", "", "naïve café 中文 [MASK]", strings.Repeat("word ", 50)}
	in := `"Hello, World!"` + "\n" + `""` + "\r\n" + `  "na\u00efve caf\u00e9 中文 [MASK]"  ` + "\n" + `"` + texts[3] + `"`
	var out bytes.Buffer
	if err := tok.WriteIDs(&out, jsonl.NewStrings(strings.NewReader(in), "in.jsonl"), 16); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, s := range texts {
		want.WriteString(formatIDs(tok.Encode(s, 16)))
	}
	if out.String() != want.String() {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want.String())
	}
}

func TestWriteIDsErrors(t *testing.T) {
	tok := loadTokenizer(t)
	for _, c := range []struct{ in, want string }{
		{"\"ok\"\n42\n", "in.jsonl line 2: want a JSON string"},
		{"\"ok\"\n\n\"x\"\n", "in.jsonl line 2: want a JSON string"},
		{"{\"contents\": \"x\"}\n", "in.jsonl line 1: want a JSON string"},
		{"\"ok\"\n\"ok\"\n\"unterminated\n", "in.jsonl line 3: unexpected end of JSON input"},
		{"\"a\" \"b\"\n", "in.jsonl line 1: invalid character"},
	} {
		var out bytes.Buffer
		err := tok.WriteIDs(&out, jsonl.NewStrings(strings.NewReader(c.in), "in.jsonl"), 256)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

// FuzzTokenizeLines: any input gives either one output line per input line, or an
// error naming a line, never a panic.
func FuzzTokenizeLines(f *testing.F) {
	tok := loadTokenizer(f)
	f.Add("\"a\"\n\"b c\"\n")
	f.Add("\"\\ud800\"\n")
	f.Add("\"\\u0000\\t[SEP]\"")
	f.Add("[\"x\"]\n")
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		err := tok.WriteIDs(&out, jsonl.NewStrings(strings.NewReader(in), "in"), 8)
		if err != nil {
			if !strings.Contains(err.Error(), "in line ") {
				t.Fatalf("error %q does not name the line", err)
			}
			return
		}
		lines := strings.Count(strings.TrimRight(strings.ReplaceAll(in, "\r\n", "\n"), "\n"), "\n") + 1
		if strings.TrimSpace(in) == "" {
			lines = 0
		}
		if got := strings.Count(out.String(), "\n"); got != lines {
			t.Fatalf("%d output lines for %d input lines", got, lines)
		}
	})
}
