package option

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Spec declares one option of an Options struct, bound to its field: the name errors give it,
// the command-line flag that sets it, its default, the values it takes and its help. A library
// declares the options of each Options type once, in a Specs method; `needle` registers its
// flags from that table (Register), the library fills defaults (Defaults) and refuses a value
// the table does not take (Check: an *Error naming the field), and a program that runs `needle`
// writes the flags of a value (Args). The table is the one place a library spells its flags.
type Spec struct {
	Field string // the Options field, as Go spells it: "MaxBatch", "Batcher.MaxBatch"
	Flag  string // its flag, without dashes: "max-batch"
	Help  string // the flag's help (--help adds the default)
	v     value
}

// value is the field behind a Spec: how it takes its default, a flag and a check.
type value interface {
	setDefault()
	register(fs *flag.FlagSet, name, help string) // the flag, with the field set to its default
	check() error                                 // why the field's value is refused; nil if taken
	isDefault() bool
	String() string // the field's value as its flag takes it
}

// Number is the type of a numeric option.
type Number interface {
	int | int64 | uint64 | float64 | time.Duration
}

// Range is the values a numeric option takes.
type Range struct {
	least   float64
	bounded bool // false: any value
	strict  bool // least itself is refused
}

// Any takes every value; Above(x) the values > x; From(x) those >= x.
var Any = Range{}

func Above(x float64) Range { return Range{least: x, bounded: true, strict: true} }
func From(x float64) Range  { return Range{least: x, bounded: true} }

func (r Range) refuses(v float64) error {
	switch {
	case !r.bounded:
		return nil
	case r.strict && !(v > r.least): // NaN is refused too
		return fmt.Errorf("want > %v", r.least)
	case !r.strict && !(v >= r.least):
		return fmt.Errorf("want >= %v", r.least)
	}
	return nil
}

// Num declares a numeric option whose default is def and whose values r takes.
func Num[T Number](p *T, field, flag string, def T, r Range, help string) Spec {
	return Spec{Field: field, Flag: flag, Help: help, v: &num[T]{p: p, def: def, r: r}}
}

// MiB declares a byte count set in MiB on the command line (--cache-mb 256 is 256<<20
// bytes); def is in bytes, r bounds the MiB. A help that says `MiB` shows it as the flag's unit.
func MiB(p *int64, field, flag string, def int64, r Range, help string) Spec {
	return Spec{Field: field, Flag: flag, Help: help, v: &mib{p: p, def: def, r: r}}
}

// String declares a text option.
func String(p *string, field, flag, def, help string) Spec {
	return Spec{Field: field, Flag: flag, Help: help, v: &text{p: p, def: def}}
}

// Bool declares a switch.
func Bool(p *bool, field, flag string, def bool, help string) Spec {
	return Spec{Field: field, Flag: flag, Help: help, v: &boolean{p: p, def: def}}
}

// List declares a list of texts, comma-separated on the command line.
func List(p *[]string, field, flag, help string) Spec {
	return Spec{Field: field, Flag: flag, Help: help, v: &list{p: p}}
}

// Var declares an option of its own syntax: v is bound to the field and parses it (Set), and
// def is what Set takes for the default ("": the field's zero value).
func Var(v flag.Value, field, flag, def, help string) Spec {
	return Spec{Field: field, Flag: flag, Help: help, v: &custom{v: v, def: def}}
}

// Value is the field's value as its flag takes it (after SetDefaults: the default --help shows).
func (s Spec) Value() string { return s.v.String() }

// Specs are the options of one Options type (and those it holds), in the order --help
// lists them.
type Specs []Spec

// SetDefaults sets every field to its default.
func (s Specs) SetDefaults() {
	for _, sp := range s {
		sp.v.setDefault()
	}
}

// Check returns an *Error for every field whose value its spec does not take (joined), or nil.
func (s Specs) Check() error {
	var errs []error
	for _, sp := range s {
		if err := sp.v.check(); err != nil {
			errs = append(errs, Errorf(sp.Field, "%s, %v", sp.v, err))
		}
	}
	return errors.Join(errs...)
}

// Register adds a flag to fs for every option, and sets every field to its default.
func (s Specs) Register(fs *flag.FlagSet) {
	for _, sp := range s {
		sp.v.register(fs, sp.Flag, sp.Help)
	}
}

// Args are the command-line flags ("--flag=value") of the options whose values are not their
// defaults, in the table's order: what `needle` takes to run with these options.
func (s Specs) Args() []string {
	var args []string
	for _, sp := range s {
		if !sp.v.isDefault() {
			args = append(args, "--"+sp.Flag+"="+sp.v.String())
		}
	}
	return args
}

// Flags maps every option's field to its flag ("Batcher.MaxBatch" -> "--max-batch").
func (s Specs) Flags() map[string]string {
	m := make(map[string]string, len(s))
	for _, sp := range s {
		m[sp.Field] = "--" + sp.Flag
	}
	return m
}

// Under returns s with prefix before every field: the options of a struct held in a field of
// another Options ("Batcher." + "MaxBatch").
func (s Specs) Under(prefix string) Specs {
	out := make(Specs, len(s))
	for i, sp := range s {
		sp.Field = prefix + sp.Field
		out[i] = sp
	}
	return out
}

// Defaults returns a T with every option its Specs declare at its default (fields without a
// spec stay zero).
func Defaults[T any, P interface {
	*T
	Specs() Specs
}]() T {
	var o T
	P(&o).Specs().SetDefaults()
	return o
}

type num[T Number] struct {
	p   *T
	def T
	r   Range
}

func (n *num[T]) setDefault()     { *n.p = n.def }
func (n *num[T]) check() error    { return n.r.refuses(float64(*n.p)) }
func (n *num[T]) isDefault() bool { return *n.p == n.def }

func (n *num[T]) String() string {
	switch v := any(*n.p).(type) {
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case time.Duration:
		return v.String()
	}
	return fmt.Sprint(*n.p)
}

func (n *num[T]) register(fs *flag.FlagSet, name, help string) {
	switch p := any(n.p).(type) {
	case *int:
		fs.IntVar(p, name, any(n.def).(int), help)
	case *int64:
		fs.Int64Var(p, name, any(n.def).(int64), help)
	case *uint64:
		fs.Uint64Var(p, name, any(n.def).(uint64), help)
	case *float64:
		fs.Float64Var(p, name, any(n.def).(float64), help)
	case *time.Duration:
		fs.DurationVar(p, name, any(n.def).(time.Duration), help)
	}
}

// mib is a byte count whose flag is in MiB.
type mib struct {
	p   *int64
	def int64
	r   Range
}

func (m *mib) setDefault()     { *m.p = m.def }
func (m *mib) check() error    { return m.r.refuses(float64(*m.p >> 20)) }
func (m *mib) isDefault() bool { return *m.p == m.def }

func (m *mib) String() string {
	if m.p == nil { // the flag package's zero value, for --help
		return "0"
	}
	return strconv.FormatInt(*m.p>>20, 10)
}

func (m *mib) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("parse error")
	}
	*m.p = v << 20
	return nil
}

func (m *mib) register(fs *flag.FlagSet, name, help string) {
	m.setDefault()
	fs.Var(m, name, help)
}

type text struct {
	p   *string
	def string
}

func (t *text) setDefault()     { *t.p = t.def }
func (t *text) check() error    { return nil }
func (t *text) isDefault() bool { return *t.p == t.def }
func (t *text) String() string  { return *t.p }
func (t *text) register(fs *flag.FlagSet, name, help string) {
	fs.StringVar(t.p, name, t.def, help)
}

type boolean struct {
	p   *bool
	def bool
}

func (b *boolean) setDefault()     { *b.p = b.def }
func (b *boolean) check() error    { return nil }
func (b *boolean) isDefault() bool { return *b.p == b.def }
func (b *boolean) String() string  { return strconv.FormatBool(*b.p) }
func (b *boolean) register(fs *flag.FlagSet, name, help string) {
	fs.BoolVar(b.p, name, b.def, help)
}

type list struct{ p *[]string }

func (l *list) setDefault()     { *l.p = nil }
func (l *list) check() error    { return nil }
func (l *list) isDefault() bool { return len(*l.p) == 0 }
func (l *list) String() string  { return strings.Join(*l.p, ",") }

func (l *list) register(fs *flag.FlagSet, name, help string) {
	l.setDefault()
	fs.Func(name, help, func(s string) error {
		*l.p = strings.Split(s, ",")
		return nil
	})
}

// custom is a Var: its flag.Value parses, and refuses at parse time what it cannot take.
type custom struct {
	v   flag.Value
	def string
}

func (c *custom) setDefault() {
	if c.def != "" {
		if err := c.v.Set(c.def); err != nil {
			panic("option: the default " + c.def + " is refused: " + err.Error()) // the table's own mistake
		}
	}
}
func (c *custom) check() error    { return nil }
func (c *custom) isDefault() bool { return c.v.String() == c.def }
func (c *custom) String() string  { return c.v.String() }

func (c *custom) register(fs *flag.FlagSet, name, help string) {
	c.setDefault()
	fs.Var(c.v, name, help)
}
