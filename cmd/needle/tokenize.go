package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"

	"needle/encoder/wordpiece"
	"needle/internal/jsonl"
)

func init() {
	register(command{name: "tokenize", summary: "JSON Lines strings -> BERT token ids (HF fast tokenizer rules)", run: runTokenize})
}

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
	src, closer, err := jsonl.Open(*in)
	if err != nil {
		return err
	}
	defer closer.Close()
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	if err := tok.WriteIDs(out, src, *maxLen); err != nil {
		out.Flush()
		return err
	}
	return out.Flush()
}
