package wordpiece

import (
	"io"
	"strconv"

	"needle/internal/jsonl"
)

// WriteIDs writes to w one line of space-separated ids ([CLS] text [SEP], at most maxLen; 0:
// no limit) for each text of src (`needle tokenize`).
func (tok *Tokenizer) WriteIDs(w io.Writer, src *jsonl.Strings, maxLen int) error {
	var ids []int32
	var line []byte
	for {
		text, ok, err := src.Next()
		if err != nil || !ok {
			return err
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
}
