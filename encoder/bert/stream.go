package bert

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"needle/internal/atomicfile"
	"needle/internal/jsonl"
	"needle/internal/npy"
)

// streamChunk is how many input texts are encoded (and their output written) at a time.
const streamChunk = 4096

// EncodeJSONL encodes the texts of src (`needle encode`) and writes each embedding to w in
// input order, as a JSON array of floats per line (each float in its shortest float32 form).
func (e *Encoder) EncodeJSONL(w io.Writer, src *jsonl.Strings, prefix string) error {
	out := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	err := e.encodeStream(src, prefix, func(v []float32) error {
		line = append(line[:0], '[')
		for i, x := range v {
			if i > 0 {
				line = append(line, ',')
			}
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("embedding holds %v, which JSON cannot represent", x)
			}
			line = strconv.AppendFloat(line, float64(x), 'g', -1, 32)
		}
		_, err := out.Write(append(line, ']', '\n'))
		return err
	})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return err
}

// EncodeNPY encodes the texts of src into a float32 NumPy file of shape (texts, dim) at path,
// written atomically (nothing appears on error).
func (e *Encoder) EncodeNPY(path string, src *jsonl.Strings, prefix string) error {
	return atomicfile.Create(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := w.Write(npy.Header("<f4", 0, int64(e.Dim()))); err != nil { // placeholder: count unknown yet
			return err
		}
		rows := 0
		err := e.encodeStream(src, prefix, func(v []float32) error {
			rows++
			return binary.Write(w, binary.LittleEndian, v)
		})
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			_, err = f.WriteAt(npy.Header("<f4", int64(rows), int64(e.Dim())), 0)
		}
		return err
	})
}

// encodeStream encodes src chunk by chunk and hands each vector to emit in input order.
func (e *Encoder) encodeStream(src *jsonl.Strings, prefix string, emit func([]float32) error) error {
	d := e.Dim()
	for {
		texts, err := src.NextN(streamChunk)
		if err != nil || len(texts) == 0 {
			return err
		}
		vecs, err := e.Encode(texts, prefix)
		if err != nil {
			return err
		}
		for i := range texts {
			if err := emit(vecs[i*d : (i+1)*d]); err != nil {
				return err
			}
		}
	}
}
