// Package option is how a library declares its options and reports one set wrong. Each Options
// type declares its options once in a table (spec.go: field, flag, default, range, help), from
// which the command line builds its flags. An error of an option set wrong is an *Error, and
// the hint of an option that would resolve an error a *Fix; both name the Options field
// ("Fusion.Weight", "Restart"), not a flag: the command that set the field from a flag names
// the flag (cmd/needle's flagError).
package option

import (
	"errors"
	"fmt"
)

// Error says that the option Field is wrong, and Err what is wrong with it.
type Error struct {
	Field string // the Options field, as Go spells it: "Index", "Fusion.Weight"
	Err   error
}

func (e *Error) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is an *Error of field whose Err is fmt.Errorf(format, a...).
func Errorf(field, format string, a ...any) error {
	return &Error{Field: field, Err: fmt.Errorf(format, a...)}
}

// Wrap is an *Error of field around err (nil for a nil err).
func Wrap(field string, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Field: field, Err: err}
}

// Fix is Err with the option that resolves it: "... (Restart replaces it)".
type Fix struct {
	Err   error
	Field string // the Options field, as Go spells it
	Does  string // what setting it does, in the third person: "replaces it", "-1 serves the codes alone"
}

func (e *Fix) Error() string { return e.Err.Error() + " " + e.Hint(e.Field) }
func (e *Fix) Unwrap() error { return e.Err }

// Hint is the parenthesis that ends the message, with the option named name.
func (e *Fix) Hint(name string) string { return "(" + name + " " + e.Does + ")" }

// Fixf is a *Fix of field, saying what it does, whose Err is fmt.Errorf(format, a...).
func Fixf(field, does, format string, a ...any) error {
	return &Fix{Err: fmt.Errorf(format, a...), Field: field, Does: does}
}

// FixedBy reports whether setting field is the fix err's chain names.
func FixedBy(err error, field string) bool {
	var f *Fix
	return errors.As(err, &f) && f.Field == field
}

// Required is an *Error of field when v is empty, else nil.
func Required(field, v string) error {
	if v != "" {
		return nil
	}
	return Errorf(field, "required")
}
