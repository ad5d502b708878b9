package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"needle/weights"
)

// weightsCmds are `needle weights send|recv|publish` (docs/weights.md).
var weightsCmds = newGroup("needle weights", "subcommand", "Weight transfer: the trainer publishes each version, every rollout host pulls full or delta (docs/weights.md).\n\n", "send", "recv", "publish")

func init() {
	register(command{name: "weights", summary: "weight transfer: send (beside the trainer), recv (beside each rollout server), publish", run: weightsCmds.run})
	weightsCmds.add(command{name: "send", summary: "the sender daemon: a shared-memory double buffer the trainer publishes into, served over TCP", run: runWeightsSend})
	weightsCmds.add(command{name: "recv", summary: "the receiver daemon: keeps a safetensors file at the newest version and tells the engine", run: runWeightsRecv})
	weightsCmds.add(command{name: "publish", summary: "publish a safetensors file to a sender", run: runWeightsPublish})
}

// daemonLog is where the daemons' log lines go: standard error, as the log package writes them,
// to the microsecond: a version reaches its receivers within a second, and the order of their
// lines across processes is what a slow one is diagnosed from.
func daemonLog() *log.Logger { return log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds) }

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runWeightsSend(args []string) error {
	var o weights.SendOptions
	fs := newFlagSet("weights send", "--dir /dev/shm/needle-weights [--listen :7070] [--http :7071]")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	o.Sender.Log = daemonLog()
	ctx, stop := signalContext()
	defer stop()
	return fs.named(weights.RunSender(ctx, o, func(tcp, http string) {
		fmt.Fprintf(os.Stderr, "needle weights send: %s, receivers on %s, metrics on %s\n", o.Sender.Dir, tcp, http)
	}))
}

func runWeightsRecv(args []string) error {
	var o weights.RecvOptions
	fs := newFlagSet("weights recv", "--from HOST:7070[,HOST2:7070] --out /dev/shm/model/model.safetensors [--notify-url http://127.0.0.1:30000/update_weights_from_disk]")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	o.Receiver.Log = daemonLog()
	ctx, stop := signalContext()
	defer stop()
	return fs.named(weights.RunReceiver(ctx, o, nil))
}

func runWeightsPublish(args []string) error {
	var o weights.PublishOptions
	fs := newFlagSet("weights publish", "--dir /dev/shm/needle-weights --file model.safetensors [--version N] [--wait]")
	fs.options(o.Specs())
	if err := fs.parse(args); err != nil {
		return err
	}
	return fs.named(weights.Publish(os.Stdout, o))
}
