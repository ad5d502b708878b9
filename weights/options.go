package weights

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"needle/internal/option"
	"needle/internal/secret"
	"needle/weights/feed"
	"needle/weights/receiver"
	"needle/weights/sender"
	"needle/weights/wire"
)

// Specs declares the sender daemon's options (`needle weights send`'s flags of them).
func (o *SendOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Sender.Dir, "Sender.Dir", "dir", "/dev/shm/needle-weights", "the double buffer's folder (halves, state, control.sock): the trainer's publisher writes here"),
		option.String(&o.Listen, "Listen", "listen", ":7070", "TCP address receivers pull from"),
		option.String(&o.HTTP, "HTTP", "http", ":7071", "address of GET /metrics and /status (empty: none)"),
		option.Var(&o.Sender.Format, "Sender.Format", "format", "packed", "delta records: packed (gap-coded indices, byte planes, zstd; \"compact\" is its old name) or astraflow"),
		option.Num(&o.Sender.Chunk, "Sender.Chunk", "chunk", wire.DefaultChunk, option.Above(0), "bytes of a record's chunk"),
		option.Num(&o.Sender.Keep, "Sender.Keep", "keep", 8, option.From(0), "delta steps retained for receivers several versions behind"),
		option.Num(&o.Sender.Threads, "Sender.Threads", "threads", runtime.NumCPU(), option.Above(0), "goroutines of an encode job"),
		option.Bool(&o.Sender.NewRun, "Sender.NewRun", "new-run", false, "forget the folder's versions and start a new run"),
		option.Num(&o.Fanout, "Fanout", "fanout", 1, option.From(1), "re-serving receivers that pull from each one in the layout of the receivers that join (1: a chain, each host forwarding records as they arrive; the sender always feeds one)"),
		option.Num(&o.Silence, "Silence", "silence", feed.MemberSilence, option.Above(0), "a joined receiver silent this long (its host killed or cut off) leaves the layout, and the hosts below it are routed around it (they have already noticed on their own transfers: recv --silence)"),
		tokenFile(&o.TokenFile),
	}
}

// tokenFile declares the TokenFile option of both daemons, whose default is $NEEDLE_TOKEN_FILE.
func tokenFile(p *string) option.Spec {
	return option.String(p, "TokenFile", "token-file", os.Getenv(secret.EnvFile), "a file holding the secret token the trainer's sender and every receiver share (default $"+secret.EnvFile+"): peers prove it to each other before any byte of a version moves; without it anyone who reaches the port can pull or feed (docs/weights.md)")
}

// readToken returns token, or the token in file when token is nil and file is set.
func readToken(token []byte, file string) ([]byte, error) {
	if token != nil || file == "" {
		return token, nil
	}
	t, err := secret.ReadFile(file)
	if err != nil {
		return nil, option.Wrap("TokenFile", err)
	}
	return t, nil
}

// Specs declares the receiver daemon's options (`needle weights recv`'s flags of them).
func (o *RecvOptions) Specs() option.Specs {
	return option.Specs{
		option.List(&o.Receiver.Upstreams, "Receiver.Upstreams", "from", "the sender (host:port): this receiver joins its layout and pulls where it is routed (re-serving hosts, nearest first), then from the sender; more comma-separated upstreams are tried after it, in order"),
		option.String(&o.Receiver.Out, "Receiver.Out", "out", "", "the safetensors file kept at the newest version (its folder: the engine's model_path)"),
		option.String(&o.Receiver.Node, "Receiver.Node", "name", "", "this receiver's name in the upstreams' logs"),
		option.Num(&o.Receiver.Threads, "Receiver.Threads", "threads", runtime.NumCPU(), option.Above(0), "goroutines that apply records and hash files"),
		option.Num(&o.Receiver.FullEvery, "Receiver.FullEvery", "full-every", 0, option.From(0), "take every N-th version in full (a resync); 0: never"),
		option.Bool(&o.Receiver.VerifyEach, "Receiver.VerifyEach", "verify-each", false, "hash every new version whole against its manifest before publishing it"),
		option.Bool(&o.Receiver.NoSpare, "Receiver.NoSpare", "no-spare", false, "keep no spare copy of the file (saves its size on disk; each delta then copies the file first)"),
		option.String(&o.Serve, "Serve", "serve", "", "re-serve what this receiver holds on this TCP address, forwarding each version while it arrives: the sender's layout then routes other hosts through this one (a chain by default); an address without a host is announced as this host's address towards the sender"),
		option.Num(&o.Receiver.Silence, "Receiver.Silence", "silence", wire.DefaultSilence, option.Above(0), "an upstream silent this long (servers beat every 250ms) counts as lost: the next one is tried"),
		tokenFile(&o.TokenFile),
		option.Num(&o.Keep, "Keep", "keep", 4, option.From(0), "delta steps retained when re-serving"),
		option.String(&o.HTTP, "HTTP", "http", "", "address of GET /metrics and /status (empty: none)"),
		option.String(&o.NotifyURL, "NotifyURL", "notify-url", "", "POST here after each version (SGLang: http://HOST:PORT/update_weights_from_disk)"),
		option.String(&o.NotifyBody, "NotifyBody", "notify-body", "", `JSON body of the POST; {dir} {path} {run} {version} are replaced (default `+`{"model_path": "{dir}"})`),
		option.String(&o.NotifyCmd, "NotifyCmd", "notify-cmd", "", "run this command (split on spaces; NEEDLE_WEIGHTS_PATH, _DIR, _RUN, _VERSION set) after each version"),
	}
}

// Check refuses what the specs do not take, a receiver without upstreams or file, and two
// ways of telling the engine.
func (o RecvOptions) Check() error {
	var both error
	if o.NotifyURL != "" && o.NotifyCmd != "" {
		both = option.Errorf("NotifyCmd", "%q: the engine is told by URL already; give one", o.NotifyCmd)
	}
	var from error
	if len(o.Receiver.Upstreams) == 0 {
		from = option.Errorf("Receiver.Upstreams", "required")
	}
	return errors.Join(from, option.Required("Receiver.Out", o.Receiver.Out), both, o.Specs().Check())
}

// notifier is the Notifier the Notify options ask for (Receiver.Notifier, when set, wins).
func (o RecvOptions) notifier() (receiver.Notifier, error) {
	if o.Receiver.Notifier != nil {
		return o.Receiver.Notifier, nil
	}
	return receiver.NewNotifier(o.NotifyURL, o.NotifyBody, strings.Fields(o.NotifyCmd))
}

// PublishOptions are `needle weights publish`'s: a safetensors file sent to a sender as a version.
type PublishOptions struct {
	Dir     string // the sender's folder
	File    string // a safetensors file
	Version uint64 // its version number (0: the newest + 1)
	Wait    bool   // wait for the delta's encode job and report its stats
}

// Specs declares the options.
func (o *PublishOptions) Specs() option.Specs {
	return option.Specs{
		option.String(&o.Dir, "Dir", "dir", "/dev/shm/needle-weights", "the sender's folder"),
		option.String(&o.File, "File", "file", "", "a safetensors file to publish as the next version (required)"),
		option.Num(&o.Version, "Version", "version", 0, option.Any, "version number (0: the newest + 1)"),
		option.Bool(&o.Wait, "Wait", "wait", false, "wait for the delta's encode job and print its stats"),
	}
}

// Publish publishes o.File to the sender of o.Dir and writes the version it got to w as one
// JSON object (with Wait, the encode job's stats too).
func Publish(w io.Writer, o PublishOptions) error {
	if err := option.Required("File", o.File); err != nil {
		return err
	}
	img, err := os.ReadFile(o.File)
	if err != nil {
		return option.Wrap("File", err)
	}
	p, err := sender.Dial(o.Dir)
	if err != nil {
		return option.Wrap("Dir", err)
	}
	defer p.Close()
	v, err := p.PublishImage(img, o.Version)
	if err != nil || !o.Wait {
		fmt.Fprintf(w, "{\"version\": %d}\n", v)
		return err
	}
	st, err := p.Wait(v)
	fmt.Fprintf(w, "{\"version\": %d, \"changed\": %d, \"elements\": %d, \"wire_bytes\": %d, \"astraflow_bytes\": %d, \"encode_seconds\": %.3f}\n",
		v, st.Changed, st.Elements, st.WireBytes, st.AstraFlowBytes, st.Seconds)
	return err
}
