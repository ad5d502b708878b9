package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"needle/faissgo"
	"needle/index/compact"
	"needle/internal/buildinfo"
	"needle/internal/progress"
)

func init() {
	register(command{name: "convert", summary: "flat index or embeddings file -> compact form (IVF-PQ + exact re-scoring; resumable)", run: runConvert})
}

func runConvert(args []string) error {
	fs := newFlagSet("convert", "--from e5_Flat.index --out DIR [flags]\n\n"+
		"Streams a FAISS flat index file (IndexFlatIP/L2, e.g. the anchors' e5_Flat.index), a headerless float32\n"+
		"memmap (emb_e5.memmap, with --dim) or a float32 .npy into a compact form in DIR: index.faiss (FAISS codes,\n"+
		"Python faiss reads it) and compact.json. The source is read once and never held in RAM. Rerun the same\n"+
		"command after a kill: it resumes from the last checkpoint and ends with the same bytes. Serve the form with\n"+
		"`needle serve --index DIR`: candidates from the codes, re-scored exactly from the source file, which must stay\n"+
		"where it is (docs/convert.md).")
	var cfg compact.Config
	fs.StringVar(&cfg.From, "from", "", "the vectors: a FAISS flat index file, a headerless float32 memmap (with --dim) or a float32 .npy (required)")
	fs.StringVar(&cfg.Out, "out", "", "the form's folder; partial/ holds the checkpoint while converting (required)")
	fs.IntVar(&cfg.Dim, "dim", 0, "width of a headerless memmap --from")
	fs.StringVar(&cfg.Metric, "metric", "", "ip or l2 for a memmap or .npy (default ip); a flat index file has its own")
	fs.StringVar(&cfg.Factory, "factory", compact.DefaultFactory, "FAISS index_factory string of the codes: OPQ64_256,IVF8192,PQ64np (a learned rotation to 256 dims, IVF lists, PQ bytes per vector), IVF4096,SQ8, SQfp16, HNSW32_SQ8, ...")
	fs.Int64Var(&cfg.TrainSize, "train-size", compact.DefaultTrainSize, "rows sampled (with --seed) to train the codes")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the --train-size sample")
	fs.IntVar(&cfg.Rescore, "rescore", compact.DefaultRescore, "search default: candidates per query re-scored exactly from --from (-1: none, serve the codes' approximate scores)")
	fs.IntVar(&cfg.Nprobe, "nprobe", compact.DefaultNprobe, "search default for IVF factories: lists visited per query")
	fs.Int64Var(&cfg.CheckpointRows, "checkpoint-rows", compact.DefaultCheckpointRows, "rows between checkpoints: the most work a kill loses")
	fs.BoolVar(&cfg.Restart, "restart", false, "discard a partial or finished conversion of other arguments in --out instead of refusing")
	threads := fs.Int("threads", 0, "CPU threads for FAISS (0 = all cores)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	case cfg.From == "" || cfg.Out == "":
		return errors.New("--from and --out are required (see --help)")
	}
	faissgo.Init(*threads)
	cfg.Version, cfg.Log = buildinfo.Version(), os.Stderr
	began := time.Now()
	rep, err := compact.Convert(cfg)
	if err != nil {
		return err
	}
	if rep.UpToDate {
		fmt.Fprintf(os.Stderr, "needle convert: %s is up to date (%d rows, %s)\n", cfg.Out, rep.Rows, rep.Form.Factory)
		return nil
	}
	fmt.Fprintf(os.Stderr, "needle convert: %s: %d rows as %s, %.2f GB, in %s (training %s, adding %s; %d rows came from a checkpoint)\n",
		cfg.Out, rep.Rows, rep.Form.Factory, float64(rep.IndexBytes)/1e9, progress.Duration(time.Since(began)),
		progress.Duration(rep.TrainTime), progress.Duration(rep.AddTime), rep.ResumedFrom)
	return nil
}
