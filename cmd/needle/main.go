// Command needle builds, serves and benchmarks the e5 retrieval index of search-augmented
// RL training, and runs the trainer's tensor ops. One file per subcommand registers itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// command is one subcommand: its files own flags and run logic.
type command struct {
	name    string
	summary string
	// run parses args (without the subcommand name) and does the work. It returns
	// flag.ErrHelp after printing usage for --help.
	run func(args []string) error
}

// commandOrder is the order `needle --help` lists subcommands in.
var commandOrder = []string{"build", "convert", "serve", "encode", "tokenize", "bench", "delta", "inspect", "doctor"}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func usage(w io.Writer) {
	fmt.Fprintf(w, "needle: native retrieval + inference engine for search-augmented RL training.\n\n")
	fmt.Fprintf(w, "Usage: needle <command> [flags]   (needle <command> --help for its flags)\n\nCommands:\n")
	for _, n := range commandOrder {
		if c, ok := commands[n]; ok {
			fmt.Fprintf(w, "  %-9s %s\n", n, c.summary)
		}
	}
}

func main() {
	os.Exit(runMain(os.Args[1:]))
}

func runMain(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(os.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "needle: unknown command %q\n\n", args[0])
		usage(os.Stderr)
		return 2
	}
	if err := c.run(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "needle %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// newFlagSet returns a FlagSet for a subcommand whose usage text starts with synopsis.
// Parse errors are returned, not fatal, so runMain prints them once.
func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("needle "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: needle %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}
