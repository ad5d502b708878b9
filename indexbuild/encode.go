package indexbuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"needle/index/indexdir"

	"needle/internal/atomicfile"
	"needle/internal/option"
	"needle/internal/progress"
)

// encodeShards makes sure every shard of the corpus exists in Out/partial, encoding the
// missing ones, and returns them as a shardSet with the corpus's bad rows. Shards of an
// interrupted run with the same encodeState are kept.
func encodeShards(cfg Config, st encodeState, parts Parts, rep *Report) (*shardSet, []indexdir.BadRow, error) {
	dir := filepath.Join(cfg.Out, partialDirName)
	if err := preparePartial(dir, st, cfg.Restart); err != nil {
		return nil, nil, err
	}
	n := parts.Corpus.Len()
	if n == 0 {
		return nil, nil, fmt.Errorf("corpus %s has no rows", cfg.Corpus)
	}
	key := st.key()
	set := &shardSet{dir: dir, rows: n, dim: st.Dim, shardRows: st.ShardRows}
	shards := (n + st.ShardRows - 1) / st.ShardRows
	var bad []indexdir.BadRow
	first := int64(0) // first shard to encode
	for ; first < shards; first++ {
		start := first * st.ShardRows
		b, err := checkShard(shardPath(dir, first), key, start, min(st.ShardRows, n-start), st.Dim)
		if errors.Is(err, errShardMissing) {
			break
		}
		if err != nil {
			fmt.Fprintf(cfg.Log, "needle build: %v; encoding it again\n", err)
			break
		}
		bad = append(bad, b...)
	}
	done := min(first*st.ShardRows, n)
	if done > 0 {
		fmt.Fprintf(cfg.Log, "needle build: resuming after %d finished rows (%d shards in %s)\n", done, first, dir)
	}
	bar := progress.Start(cfg.Log, progress.Options{Label: "passages", Total: n, Done: done})
	defer bar.Finish()
	began := time.Now()
	texts := make([]string, 0, cfg.EncodeRows)
	emb := make([]float32, 0, st.ShardRows*int64(st.Dim))
	for s := first; s < shards; s++ {
		start := s * st.ShardRows
		end := min(start+st.ShardRows, n)
		emb = emb[:0]
		var shardBad []indexdir.BadRow
		for lo := start; lo < end; lo += int64(cfg.EncodeRows) {
			texts = texts[:0]
			for i := lo; i < min(lo+int64(cfg.EncodeRows), end); i++ {
				text, reason, err := parts.Corpus.Passage(i)
				if err != nil {
					return nil, nil, fmt.Errorf("corpus %s row %d: %w", cfg.Corpus, i, err)
				}
				if reason != "" {
					shardBad = append(shardBad, indexdir.BadRow{Line: i + 1, Reason: reason})
				}
				texts = append(texts, text)
			}
			vecs, err := parts.Encoder.Encode(texts, cfg.Prefix)
			if err != nil {
				return nil, nil, fmt.Errorf("encode rows %d..%d: %w", lo, lo+int64(len(texts))-1, err)
			}
			if len(vecs) != len(texts)*st.Dim {
				return nil, nil, fmt.Errorf("encoder returned %d floats for %d texts of dim %d", len(vecs), len(texts), st.Dim)
			}
			emb = append(emb, vecs...)
			bar.Add(int64(len(texts)))
		}
		if err := writeShard(shardPath(dir, s), key, start, st.Dim, emb, shardBad); err != nil {
			return nil, nil, err
		}
		bad = append(bad, shardBad...)
	}
	rep.Encoded = n - done
	rep.EncodeTime = time.Since(began)
	return set, bad, nil
}

// preparePartial creates the partial folder for st, or checks that the one there belongs to
// st. With restart, a partial folder of other arguments is discarded.
func preparePartial(dir string, st encodeState, restart bool) error {
	path := filepath.Join(dir, stateFileName)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		var old encodeState
		if err := json.Unmarshal(data, &old); err != nil {
			return &option.Fix{Err: fmt.Errorf("%s: %w (remove the folder)", path, err), Field: "Restart", Does: "discards it"}
		}
		diff := st.diff(old)
		if len(diff) == 0 {
			return nil
		}
		if !restart {
			return option.Fixf("Restart", "discards it", "%s holds an interrupted build with other arguments (%s); rerun with the same arguments to resume",
				dir, strings.Join(diff, "; "))
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("partial folder: %w", err)
	}
	data, _ = json.MarshalIndent(st, "", "  ")
	return atomicfile.Write(path, append(data, '\n'))
}
