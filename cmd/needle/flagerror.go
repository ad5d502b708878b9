package main

import (
	"strings"

	"needle/internal/option"
)

// optionFlags names the flags of the option errors of the commands whose options have no
// table yet (convert, encode, inspect, doctor, delta, tokenize declare their flags themselves);
// runMain applies it to every error. The commands with tables name their own (flagSet.named).
var optionFlags = map[string]string{"Restart": "--restart", "Metric": "--metric", "Dim": "--dim", "GPU": "--gpu",
	"Index": "--index", "Corpus": "--corpus", "Model": "--model", "Precision": "--precision", "ForcePrecision": "--force-precision"}

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
