// Command needle builds, serves and benchmarks the e5 retrieval index of search-augmented
// RL training, and runs the trainer's tensor ops. One file per subcommand registers itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"

	"needle/internal/option"
)

// command is one subcommand: its files own flags and run logic.
type command struct {
	name    string
	summary string
	// run parses args (without the subcommand name) and does the work. It returns
	// flag.ErrHelp after printing usage for --help.
	run func(args []string) error
}

// group is a command made of subcommands (needle itself, needle bench, needle delta): files
// add theirs in init, and --help lists them in order.
type group struct {
	name, noun string // "needle bench", "target": for usage lines and errors
	intro      string // what the group is, atop its usage ("" for none)
	order      []string
	subs       map[string]command
}

func newGroup(name, noun, intro string, order ...string) *group {
	return &group{name: name, noun: noun, intro: intro, order: order, subs: map[string]command{}}
}

func (g *group) add(c command) { g.subs[c.name] = c }

func (g *group) usage(w io.Writer) {
	fmt.Fprint(w, g.intro)
	fmt.Fprintf(w, "Usage: %s <%s> [flags]   (%s <%s> --help for its flags)\n\n%ss:\n", g.name, g.noun, g.name, g.noun, strings.ToUpper(g.noun[:1])+g.noun[1:])
	for _, n := range g.order {
		if c, ok := g.subs[n]; ok {
			fmt.Fprintf(w, "  %-9s %s\n", n, c.summary)
		}
	}
}

// lookup finds the subcommand args[0] names. With no args or --help it prints the usage to
// stdout and returns errNoSubcommand or flag.ErrHelp.
func (g *group) lookup(args []string) (command, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		g.usage(os.Stdout)
		if len(args) == 0 {
			return command{}, errNoSubcommand
		}
		return command{}, flag.ErrHelp
	}
	c, ok := g.subs[args[0]]
	if !ok {
		return command{}, fmt.Errorf("unknown %s %q (see %s --help)", g.noun, args[0], g.name)
	}
	return c, nil
}

// run runs a nested group's subcommand (needle bench kernels ...).
func (g *group) run(args []string) error {
	c, err := g.lookup(args)
	if errors.Is(err, errNoSubcommand) {
		return fmt.Errorf("missing %s", g.noun)
	} else if err != nil {
		return err
	}
	return c.run(args[1:])
}

var errNoSubcommand = errors.New("no subcommand")

var needle = newGroup("needle", "command", "needle: native retrieval + inference engine for search-augmented RL training.\n\n", "build", "convert", "serve", "front", "encode", "tokenize", "bench", "delta", "weights", "inspect", "doctor")

func register(c command) { needle.add(c) }

func main() {
	os.Exit(runMain(os.Args[1:]))
}

func runMain(args []string) int {
	c, err := needle.lookup(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errNoSubcommand):
		return 2
	case err != nil:
		fmt.Fprintf(os.Stderr, "needle: %v\n\n", err)
		needle.usage(os.Stderr)
		return 2
	}
	if err := flagError(c.run(args[1:]), optionFlags); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "needle %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// flagSet is a subcommand's flags. The options tables registered on it give their fields'
// flags to the option errors of the run (named): "Batcher.MaxBatch: 0, want > 0" reads
// "--max-batch: 0, want > 0".
type flagSet struct {
	*flag.FlagSet
	names map[string]string // Options field -> its flag, as errors name it ("--max-batch")
}

// newFlagSet returns the flags of a subcommand whose usage text starts with synopsis. Parse
// errors are returned, not fatal, so runMain prints them once.
func newFlagSet(name, synopsis string) *flagSet {
	fs := flag.NewFlagSet("needle "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: needle %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return &flagSet{FlagSet: fs, names: map[string]string{}}
}

// options registers the flags of the options tables, each set to its default.
func (fs *flagSet) options(tables ...option.Specs) {
	for _, t := range tables {
		t.Register(fs.FlagSet)
		maps.Copy(fs.names, t.Flags())
	}
}

// alias adds flag name as another name of flag of (the anchors' --index_path for --index).
func (fs *flagSet) alias(name, of string) {
	fs.Var(fs.Lookup(of).Value, name, "alias of --"+of)
	for field, flag := range fs.names {
		if flag == "--"+of {
			fs.names[field] = flag + " (or --" + name + ")"
		}
	}
}

// given reports whether the command line set flag name (after Parse).
func (fs *flagSet) given(name string) bool {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}

// parse parses args, which must all be flags.
func (fs *flagSet) parse(args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return nil
}

// named is err with the option errors in it naming their flags (flagError).
func (fs *flagSet) named(err error) error { return flagError(err, fs.names) }
