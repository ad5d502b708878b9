package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"needle/engine/wordpiece"
)

func init() {
	register(command{name: "tokenize", summary: "JSON Lines strings -> BERT token ids (HF fast tokenizer rules)", run: runTokenize})
}

// maxTokenizeLine is the longest input line tokenize accepts, in bytes.
const maxTokenizeLine = 64 << 20

func runTokenize(args []string) error {
	fs := newFlagSet("tokenize", "--model DIR [--max-length 256] [--in FILE]\n\n"+
		"Reads JSON Lines, one JSON string per line, and prints one line per input: the\n"+
		"space-separated token ids of [CLS] text [SEP], the ids HF's fast BertTokenizer\n"+
		"gives (added special tokens such as [MASK] in the text are matched). Stops at the\n"+
		"first bad line with an error naming its number; earlier lines are already printed.")
	model := fs.String("model", "", "model folder with tokenizer.json, or vocab.txt (+ tokenizer_config.json) (required)")
	maxLen := fs.Int("max-length", 256, "ids per text at most, [CLS] and [SEP] included (right truncation); 0 = no limit")
	in := fs.String("in", "-", "input file of JSON Lines strings; - reads stdin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	case *model == "":
		return errors.New("--model is required (see --help)")
	case *maxLen < 0:
		return fmt.Errorf("--max-length %d: want >= 0", *maxLen)
	}
	tok, err := wordpiece.Load(*model)
	if err != nil {
		return err
	}
	r, name := io.Reader(os.Stdin), "stdin"
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		r, name = f, *in
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	if err := tokenizeLines(r, name, out, tok, *maxLen); err != nil {
		out.Flush()
		return err
	}
	return out.Flush()
}

// tokenizeLines writes one line of space-separated ids to w for each JSON string line
// of r; name is r's name for errors, which also give the 1-based line number.
func tokenizeLines(r io.Reader, name string, w io.Writer, tok *wordpiece.Tokenizer, maxLen int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), maxTokenizeLine)
	var ids []int32
	var line []byte
	var text string
	n := 0 // lines read
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 || raw[0] != '"' {
			return fmt.Errorf("%s line %d: want a JSON string, got %.40q", name, n, raw)
		}
		if err := json.Unmarshal(raw, &text); err != nil {
			return fmt.Errorf("%s line %d: %v", name, n, err)
		}
		ids = tok.AppendEncode(ids[:0], text, maxLen)
		line = line[:0]
		for i, id := range ids {
			if i > 0 {
				line = append(line, ' ')
			}
			line = strconv.AppendInt(line, int64(id), 10)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s line %d: longer than %d bytes", name, n+1, maxTokenizeLine)
		}
		return fmt.Errorf("%s line %d: %w", name, n+1, err)
	}
	return nil
}
