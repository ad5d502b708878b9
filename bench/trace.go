package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"

	"needle/internal/atomicfile"
	"needle/internal/option"
)

// TraceOptions are the flags of `needle bench trace`: the shape of one GRPO step of a
// search agent, whose queries `needle bench retrieve --trace` replays.
type TraceOptions struct {
	QueriesFile string // texts to draw the trace's queries from (as --queries of bench retrieve)
	Out         string // trace file to write (JSONL)
	Prompts     int    // prompts in the step
	Rollouts    int    // rollouts per prompt (the GRPO group)
	Turns       int    // search turns per rollout
	Own         int    // rollouts per later turn that ask a query of their own; the others share one
	Seed        uint64 // picks the texts and the arrival order
}

// Specs declares the options (`needle bench trace`'s flags).
func (o *TraceOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.QueriesFile, "QueriesFile", "queries", "", "texts to draw from: JSONL with a \"query\" (or \"question\") per line, or plain lines (required)"),
		option.String(&o.Out, "Out", "out", "", "trace file to write (required)"),
		option.Num(&o.Prompts, "Prompts", "prompts", 512, option.Above(0), "prompts in the step (Search-R1 trains on batches of 512)"),
		option.Num(&o.Rollouts, "Rollouts", "rollouts", 8, option.Above(0), "rollouts per prompt (the GRPO group size)"),
		option.Num(&o.Turns, "Turns", "turns", 3, option.Above(0), "search turns per rollout"),
		option.Num(&o.Own, "Own", "own", 2, option.From(0), "rollouts per later turn asking a query of their own (0..--rollouts)"),
		option.Num(&o.Seed, "Seed", "seed", 1, option.Any, "random seed: picks the texts and the arrival order"),
	}
}

// traceLine is one query of a trace, in arrival order.
type traceLine struct {
	Query   string `json:"query"`
	Prompt  int    `json:"prompt"`
	Rollout int    `json:"rollout"`
	Turn    int    `json:"turn"`
}

// Trace writes a GRPO-shaped trace and a summary line to w. The mix: in turn 1 every
// rollout of a prompt asks the prompt's question (the same text); in each later turn, Own
// rollouts ask a query of their own and the other Rollouts-Own ask the turn's one shared
// follow-up. Arrival order: all turn-1 queries of the step in random order, then all turn-2
// queries, and so on, as rollouts that run in lockstep per turn but finish their reasoning
// at different times. Texts are distinct lines of QueriesFile, drawn at random.
func Trace(w io.Writer, opt TraceOptions) error {
	if err := errors.Join(option.Required("QueriesFile", opt.QueriesFile), option.Required("Out", opt.Out), opt.Specs().Check()); err != nil {
		return err
	}
	if opt.Own < 0 || opt.Own > opt.Rollouts {
		return option.Errorf("Own", "%d, want 0 to Rollouts (%d)", opt.Own, opt.Rollouts)
	}
	texts, err := readQueryTexts(opt.QueriesFile)
	if err != nil {
		return err
	}
	texts = distinct(texts)
	perLater := opt.Own
	if opt.Own < opt.Rollouts {
		perLater++ // the shared follow-up
	}
	need := opt.Prompts * (1 + (opt.Turns-1)*perLater)
	if need > len(texts) {
		return option.Errorf("Prompts", "%d: the trace needs %d distinct queries, %s has %d", opt.Prompts, need, opt.QueriesFile, len(texts))
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0))
	rng.Shuffle(len(texts), func(i, j int) { texts[i], texts[j] = texts[j], texts[i] })
	next := 0
	draw := func() string {
		next++
		return texts[next-1]
	}
	var lines []traceLine
	for turn := 1; turn <= opt.Turns; turn++ {
		first := len(lines)
		for p := range opt.Prompts {
			shared := draw()
			for r := range opt.Rollouts {
				q := shared
				if turn > 1 && r < opt.Own {
					q = draw()
				}
				lines = append(lines, traceLine{Query: q, Prompt: p, Rollout: r, Turn: turn})
			}
		}
		turnLines := lines[first:]
		rng.Shuffle(len(turnLines), func(i, j int) { turnLines[i], turnLines[j] = turnLines[j], turnLines[i] })
	}
	err = atomicfile.Create(opt.Out, func(f *os.File) error {
		bw := bufio.NewWriter(f)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return err
	}
	queries := make([]string, len(lines))
	for i, l := range lines {
		queries[i] = l.Query
	}
	fmt.Fprintf(w, "wrote %s: %d queries (%d prompts x %d rollouts x %d turns), %d distinct: %.1f%% repeat an earlier query\n",
		opt.Out, len(lines), opt.Prompts, opt.Rollouts, opt.Turns, len(distinct(queries)), 100*repeatRate(queries))
	return nil
}

// distinct returns texts without repeats, in first-seen order.
func distinct(texts []string) []string {
	seen := make(map[string]bool, len(texts))
	out := texts[:0:0]
	for _, t := range texts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// repeatRate is the fraction of queries that repeat an earlier one: the hit rate of a
// cache that never evicts and sees the queries in this order.
func repeatRate(queries []string) float64 {
	if len(queries) == 0 {
		return 0
	}
	return 1 - float64(len(distinct(queries)))/float64(len(queries))
}
