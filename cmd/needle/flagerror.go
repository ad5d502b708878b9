package main

import (
	"strings"

	"needle/internal/option"
)

// optionFlags names the flag that sets each Options field of the libraries' option errors
// (every command spells a field's flag the same way); runMain applies it to every error.
var optionFlags = map[string]string{
	"Index": "--index", "Corpus": "--corpus", "Pages": "--pages", "Model": "--model", "Milvus": "--milvus",
	"GPU": "--gpu", "BM25": "--bm25", "Fusion.Method": "--fusion", "Fusion.Weight": "--fusion-weight",
	"RerankModel": "--rerank-model", "Precision": "--precision", "ForcePrecision": "--force-precision",
	"Rescore": "--rescore", "Restart": "--restart", "Dim": "--dim", "Metric": "--metric",
	"Replace": "--replace", "SaveAddressTo": "--save-address-to",
	// needle bench's
	"Queries": "--queries", "QueriesFile": "--queries", "Trace": "--trace", "Out": "--out", "Plot": "--plot",
	"Batch": "--batch", "Batches": "--batches", "K": "--k", "GTK": "--gt-k", "Rounds": "--rounds", "Rows": "--rows",
	"Words": "--words", "Lookups": "--lookups", "Concurrency": "--concurrency", "Duration": "--duration",
	"ServerPID": "--server-pid", "Passages": "--passages", "BatchSize": "--batch-size", "Threads": "--threads",
	"Repeat": "--repeat", "Shape": "--shape", "MembwMiB": "--membw-mib", "MinTime": "--min-time",
	"Prompts": "--prompts", "Rollouts": "--rollouts", "Turns": "--turns", "Own": "--own",
	"Fairness.Post": "--post", "Fairness.Rate": "--rate", "Fairness.Rounds": "--rounds", "Fairness.Idle": "--idle",
}

// serveOptionFlags names, for needle serve, the anchors' aliases beside the flags.
var serveOptionFlags = map[string]string{"Corpus": "--corpus (or --corpus_path)", "Model": "--model (or --retriever_model)"}

// flagError rewrites the option errors and hints in err's tree whose fields flags names, so
// that the message names the flags instead ("Fusion.Weight: 2, want ..." -> "--fusion-weight:
// 2, want ...", "(Restart replaces it)" -> "(--restart replaces it)"); errors.Is and errors.As
// still see err. Other errors come back as they are.
func flagError(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	walk(err, func(e error) {
		switch e := e.(type) {
		case *option.Error:
			if flag, ok := flags[e.Field]; ok {
				msg = strings.Replace(msg, e.Error(), flag+": "+e.Err.Error(), 1)
			}
		case *option.Fix:
			if flag, ok := flags[e.Field]; ok {
				msg = strings.Replace(msg, e.Hint(e.Field), e.Hint(flag), 1)
			}
		}
	})
	if msg == err.Error() {
		return err
	}
	return &flaggedError{msg: msg, err: err}
}

// walk calls visit on err and every error it wraps, outermost first.
func walk(err error, visit func(error)) {
	visit(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			walk(inner, visit)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			walk(inner, visit)
		}
	}
}

// flaggedError is an error with its message rewritten by flagError.
type flaggedError struct {
	msg string
	err error
}

func (e *flaggedError) Error() string { return e.msg }
func (e *flaggedError) Unwrap() error { return e.err }
