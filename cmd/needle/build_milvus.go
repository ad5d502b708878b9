package main

import (
	"fmt"
	"os"
	"time"

	"needle/engine/indexbuild"
	"needle/engine/milvusindex"
	"needle/internal/progress"
)

// buildMilvus is `needle build --milvus`: the corpus's vectors (encoded through the
// resumable shards in --out, or read from --embeddings: a memmap, .npy or FAISS flat index)
// are inserted into a Milvus collection, which Milvus then indexes. Both halves resume:
// the shards after the last finished one, the collection after the rows it holds.
func buildMilvus(cfg indexbuild.Config, opt milvusindex.BuildOptions, load encoderLoader, batch, threads int, precision string) error {
	began := time.Now()
	corpus, err := openCorpusWithProgress(cfg.Corpus, cfg.Out)
	if err != nil {
		return err
	}
	defer corpus.Close()
	parts := indexbuild.Parts{Corpus: corpusPassages{corpus}}
	enc, err := loadPassageEncoder(&cfg, &parts, load, batch, threads, precision)
	if err != nil {
		return err
	}
	if enc != nil {
		defer enc.Close()
	}
	vecs, rep, closeVecs, err := indexbuild.Embed(cfg, parts)
	if err != nil {
		return err
	}
	defer closeVecs()
	mrep, err := milvusindex.Build(opt, vecs)
	if err != nil {
		return err
	}
	w := os.Stderr
	inserted := mrep.Rows - mrep.Resumed
	fmt.Fprintf(w, "needle build: done in %s: milvus collection %q at %s holds %d rows (%d bad, indexed as empty text), %s index\n",
		progress.Duration(time.Since(began)), opt.Collection, opt.URI, mrep.Rows, rep.BadRows, opt.IndexType)
	fmt.Fprintf(w, "needle build: inserted %d rows in %s = %.0f rows/s (%d came from an earlier run); flush and index %s\n",
		inserted, progress.Duration(mrep.InsertTime), float64(inserted)/max(mrep.InsertTime.Seconds(), 1e-9), mrep.Resumed,
		progress.Duration(mrep.IndexTime))
	if rep.Encoded > 0 {
		fmt.Fprintf(w, "needle build: encoded %d passages in %s = %.1f passages/s\n",
			rep.Encoded, progress.Duration(rep.EncodeTime), float64(rep.Encoded)/rep.EncodeTime.Seconds())
	}
	return nil
}
