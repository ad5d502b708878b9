// Command cluster rehearses needle across hosts on one machine: hosts in network namespaces on
// one switch, each link shaped by tc to a rate (testkit/netcluster; no delay or loss: this
// kernel has no netem), the real binaries running inside them.
//
//	go run ./tools/cluster weights --hosts 8 --link 1gbit --mib 512 --versions 4
//
// weights: a trainer host (`needle weights send`) and --hosts rollout hosts (`needle weights
// recv`, re-serving: the sender lays them out in a chain; --star: none re-serves and all pull
// from the sender) take a full version and deltas of about --changed of the elements (made as
// an optimizer's steps: weightstest.Optimizer). It reports, per version, the time from the
// trainer's publish call to each host ready, against the goals of S/L (the version's bytes over
// the link rate): a full version within 1.3 S/L + 1 s, a delta within 0.1 S/L + 0.5 s; the bytes
// each host's link carried up (tc's counters) and how busy the machine's CPUs were meanwhile,
// to show whether the links or the CPUs decided. Needs root; run it on a machine nobody else
// loads (docs/weights.md, "Across hosts").
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "weights" {
		fmt.Fprintln(os.Stderr, "usage: cluster weights [flags]   (cluster weights --help lists them)")
		os.Exit(2)
	}
	if err := weights(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "cluster weights:", err)
		os.Exit(1)
	}
}
