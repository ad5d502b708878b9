package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"needle/internal/secret"
	"needle/weights"
	"needle/weights/feed"
	"needle/weights/receiver"
	"needle/weights/sender"
	"needle/weights/wire"
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
	var format string
	fs := newFlagSet("weights send", "--dir /dev/shm/needle-weights [--listen :7070] [--http :7071]")
	fs.StringVar(&o.Sender.Dir, "dir", "/dev/shm/needle-weights", "the double buffer's folder (halves, state, control.sock): the trainer's publisher writes here")
	fs.StringVar(&o.Listen, "listen", ":7070", "TCP address receivers pull from")
	fs.StringVar(&o.HTTP, "http", ":7071", "address of GET /metrics and /status (empty: none)")
	fs.StringVar(&format, "format", "compact", "delta records: compact (gap-coded indices, byte planes, zstd) or astraflow")
	fs.Int64Var(&o.Sender.Chunk, "chunk", wire.DefaultChunk, "bytes of a record's chunk")
	fs.IntVar(&o.Sender.Keep, "keep", 8, "delta steps retained for receivers several versions behind")
	fs.IntVar(&o.Sender.Threads, "threads", runtime.NumCPU(), "goroutines of an encode job")
	fs.BoolVar(&o.Sender.NewRun, "new-run", false, "forget the folder's versions and start a new run")
	fs.IntVar(&o.Fanout, "fanout", 1, "re-serving receivers that pull from each one in the layout of the receivers that join (1: a chain, each host forwarding records as they arrive; the sender always feeds one)")
	fs.DurationVar(&o.Silence, "silence", feed.MemberSilence, "a joined receiver silent this long (its host killed or cut off) leaves the layout, and the hosts below it are routed around it (they have already noticed on their own transfers: recv --silence)")
	tokenFile := tokenFileFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Silence <= 0 || o.Fanout < 1 {
		return fmt.Errorf("--silence must be > 0 and --fanout >= 1, got %s and %d", o.Silence, o.Fanout)
	}
	var err error
	if o.Token, err = readToken(*tokenFile); err != nil {
		return err
	}
	f, err := wire.ParseFormat(format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	o.Sender.Format, o.Sender.Log = f, daemonLog()
	ctx, stop := signalContext()
	defer stop()
	return weights.RunSender(ctx, o, func(tcp, http string) {
		fmt.Fprintf(os.Stderr, "needle weights send: %s, receivers on %s, metrics on %s\n", o.Sender.Dir, tcp, http)
	})
}

func runWeightsRecv(args []string) error {
	var o weights.RecvOptions
	var upstreams, notifyURL, notifyBody, notifyCmd string
	fs := newFlagSet("weights recv", "--from HOST:7070[,HOST2:7070] --out /dev/shm/model/model.safetensors [--notify-url http://127.0.0.1:30000/update_weights_from_disk]")
	fs.StringVar(&upstreams, "from", "", "the sender (host:port): this receiver joins its layout and pulls where it is routed (re-serving hosts, nearest first), then from the sender; more comma-separated upstreams are tried after it, in order")
	fs.StringVar(&o.Receiver.Out, "out", "", "the safetensors file kept at the newest version (its folder: the engine's model_path)")
	fs.StringVar(&o.Receiver.Node, "name", "", "this receiver's name in the upstreams' logs")
	fs.IntVar(&o.Receiver.Threads, "threads", runtime.NumCPU(), "goroutines that apply records and hash files")
	fs.IntVar(&o.Receiver.FullEvery, "full-every", 0, "take every N-th version in full (a resync); 0: never")
	fs.BoolVar(&o.Receiver.VerifyEach, "verify-each", false, "hash every new version whole against its manifest before publishing it")
	fs.BoolVar(&o.Receiver.NoSpare, "no-spare", false, "keep no spare copy of the file (saves its size on disk; each delta then copies the file first)")
	fs.StringVar(&o.Serve, "serve", "", "re-serve what this receiver holds on this TCP address, forwarding each version while it arrives: the sender's layout then routes other hosts through this one (a chain by default); an address without a host is announced as this host's address towards the sender")
	fs.DurationVar(&o.Receiver.Silence, "silence", wire.DefaultSilence, "an upstream silent this long (servers beat every 250ms) counts as lost: the next one is tried")
	tokenFile := tokenFileFlag(fs)
	fs.IntVar(&o.Keep, "keep", 4, "delta steps retained when re-serving")
	fs.StringVar(&o.HTTP, "http", "", "address of GET /metrics and /status (empty: none)")
	fs.StringVar(&notifyURL, "notify-url", "", "POST here after each version (SGLang: http://HOST:PORT/update_weights_from_disk)")
	fs.StringVar(&notifyBody, "notify-body", "", `JSON body of the POST; {dir} {path} {run} {version} are replaced (default `+`{"model_path": "{dir}"})`)
	fs.StringVar(&notifyCmd, "notify-cmd", "", "run this command (split on spaces; NEEDLE_WEIGHTS_PATH, _DIR, _RUN, _VERSION set) after each version")
	if err := parseRequired(fs, args, map[string]*string{"from": &upstreams, "out": &o.Receiver.Out}); err != nil {
		return err
	}
	o.Receiver.Upstreams = strings.Split(upstreams, ",")
	if notifyURL != "" && notifyCmd != "" {
		return fmt.Errorf("--notify-url and --notify-cmd: give one")
	}
	if o.Receiver.Silence <= 0 {
		return fmt.Errorf("--silence must be > 0, got %s", o.Receiver.Silence)
	}
	var err error
	if o.Receiver.Token, err = readToken(*tokenFile); err != nil {
		return err
	}
	n, err := receiver.NewNotifier(notifyURL, notifyBody, strings.Fields(notifyCmd))
	if err != nil {
		return err
	}
	o.Receiver.Notifier, o.Receiver.Log = n, daemonLog()
	ctx, stop := signalContext()
	defer stop()
	return weights.RunReceiver(ctx, o, nil)
}

// tokenFileFlag declares --token-file (default $NEEDLE_TOKEN_FILE) on fs.
func tokenFileFlag(fs *flag.FlagSet) *string {
	return fs.String("token-file", os.Getenv(secret.EnvFile), "a file holding the secret token the trainer's sender and every receiver share (default $"+secret.EnvFile+"): peers prove it to each other before any byte of a version moves; without it anyone who reaches the port can pull or feed (docs/weights.md)")
}

// readToken reads the token file named by --token-file, if any.
func readToken(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	t, err := secret.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--token-file: %w", err)
	}
	return t, nil
}

func runWeightsPublish(args []string) error {
	var dir, file string
	var version uint64
	var wait bool
	fs := newFlagSet("weights publish", "--dir /dev/shm/needle-weights --file model.safetensors [--version N] [--wait]")
	fs.StringVar(&dir, "dir", "/dev/shm/needle-weights", "the sender's folder")
	fs.StringVar(&file, "file", "", "a safetensors file to publish as the next version")
	fs.Uint64Var(&version, "version", 0, "version number (0: the newest + 1)")
	fs.BoolVar(&wait, "wait", false, "wait for the delta's encode job and print its stats")
	if err := parseRequired(fs, args, map[string]*string{"file": &file}); err != nil {
		return err
	}
	img, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	p, err := sender.Dial(dir)
	if err != nil {
		return err
	}
	defer p.Close()
	v, err := p.PublishImage(img, version)
	if err != nil || !wait {
		fmt.Printf("{\"version\": %d}\n", v)
		return err
	}
	st, err := p.Wait(v)
	fmt.Printf("{\"version\": %d, \"changed\": %d, \"elements\": %d, \"wire_bytes\": %d, \"astraflow_bytes\": %d, \"encode_seconds\": %.3f}\n",
		v, st.Changed, st.Elements, st.WireBytes, st.AstraFlowBytes, st.Seconds)
	return err
}
