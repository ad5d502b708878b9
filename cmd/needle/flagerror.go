package main

import (
	"strings"

	"needle/internal/option"
)

// serveOptionFlags names the flag of each engine.Options field that needle serve sets from one.
var serveOptionFlags = map[string]string{
	"Index": "--index", "Corpus": "--corpus (or --corpus_path)", "Pages": "--pages", "Model": "--model (or --retriever_model)", "Milvus": "--milvus",
	"GPU": "--gpu", "BM25": "--bm25", "Fusion.Method": "--fusion", "Fusion.Weight": "--fusion-weight",
	"RerankModel": "--rerank-model",
}

// flagError rewrites each *option.Error in err's tree whose field flags names so that its
// message names the flag instead ("Fusion.Weight: 2, want ..." -> "--fusion-weight: 2, want
// ..."); errors.Is and errors.As still see err. Other errors come back as they are.
func flagError(err error, flags map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, e := range optionErrors(err) {
		if flag, ok := flags[e.Field]; ok {
			msg = strings.Replace(msg, e.Error(), flag+": "+e.Err.Error(), 1)
		}
	}
	if msg == err.Error() {
		return err
	}
	return &flaggedError{msg: msg, err: err}
}

// optionErrors are the *option.Errors in err's tree, outermost first.
func optionErrors(err error) []*option.Error {
	var found []*option.Error
	if e, ok := err.(*option.Error); ok {
		found = append(found, e)
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			found = append(found, optionErrors(inner)...)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			found = append(found, optionErrors(inner)...)
		}
	}
	return found
}

// flaggedError is an error with its message rewritten by flagError.
type flaggedError struct {
	msg string
	err error
}

func (e *flaggedError) Error() string { return e.msg }
func (e *flaggedError) Unwrap() error { return e.err }
