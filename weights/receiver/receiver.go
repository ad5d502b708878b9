// Package receiver keeps a safetensors file at the newest version a weights server offers:
// it pulls delta steps when it holds their base version and the whole version otherwise,
// builds each version beside the file and renames it into place (a reader opens the old file
// or the new one, never a mix), tells the inference engine, and optionally re-serves what it
// holds (its file, and the delta steps it receives, relayed while they arrive) so that hosts
// can pull from each other in a chain or tree instead of all from the sender.
//
// The engine is told through a Notifier (notify.go). Files (see state.go): Out, the weights
// file; beside it a hidden folder with state.json, next (the version being built) and spare (a
// copy of Out made after each version, so that the next delta step starts without copying Out
// on the critical path).
package receiver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"needle/internal/atomicfile"
	"needle/internal/idle"
	"needle/internal/mapfile"
	"needle/internal/prom"
	"needle/weights/store"
	"needle/weights/wire"
)

// Options configures a Receiver.
type Options struct {
	// Upstreams are weights servers, host:port, tried in this order after the route the
	// sender among them gives (the receiver joins its layout).
	Upstreams []string
	Out       string // the weights file kept at the newest version
	Node      string // this receiver's name in the upstreams' logs
	// Serve is host:port where Store is re-served, as the sender tells others to reach it (an
	// empty or unspecified host: this host's address towards the sender); "" for none.
	Serve string
	// Token, if set, is the secret shared with the upstreams (wire.ClientHandshake): an
	// upstream that cannot prove it is not pulled from.
	Token []byte
	// Silence is how long an upstream may send nothing before it counts as lost (it beats
	// every wire.BeatEvery); 0: wire.DefaultSilence.
	Silence   time.Duration
	Threads   int // goroutines that apply records and hash files
	FullEvery int // take every FullEvery-th version in full (a resync); 0 never
	// VerifyEach hashes every new version whole against its manifest before publishing it;
	// otherwise the file is verified when the receiver starts, and each version by the
	// per-record checks of the wire and the per-chunk checks of apply.
	VerifyEach bool
	NoSpare    bool           // do not keep a spare copy (saves Out's size in disk; deltas then copy Out first)
	Notifier   Notifier       // nil: the engine is not told
	Store      *store.Store   // non-nil: put Out and relayed steps here for re-serving
	Metrics    *prom.Registry // nil: a private one
	Log        *log.Logger    // nil: discarded
	Retry      time.Duration  // first pause after a failed attempt (doubles up to 30 s); 0: 200 ms
	// Ready, if set, is called after each version is published and the engine told (or the
	// telling failed): for in-process users such as the benchmark.
	Ready func(run string, version uint64)
}

// Receiver keeps Out up to date. Run it once; Close releases the folder.
type Receiver struct {
	opt         Options
	f           files
	lock        *os.File
	st          state
	verified    bool           // Out is st.Version, checked against its manifest or built here
	outChunkMap *wire.ChunkMap // Out's chunk map once verified
	forceFull   bool           // the last delta failed a check: take the next version in full
	sinceFull   int            // versions taken as deltas since the last full one
	rt          *route
	up          *upstream
	upIdx       int             // index of up's address in the route's list
	upGen       int             // the route's generation the index is of
	build       *build          // the version being built in next, nil when none
	snap        *store.Snapshot // Out as re-served
	// spareMap is spare mapped with its page tables filled, made right after the spare (while
	// waiting for the next version) so that the next delta step starts without that pass.
	spareMap *mapped
	m        counters
}

// Open takes the folder of opt.Out and recovers it from a crash (see files.recover).
func Open(opt Options) (*Receiver, error) {
	if len(opt.Upstreams) == 0 {
		return nil, errors.New("no upstream to pull from")
	}
	opt.Threads = max(opt.Threads, 1)
	if opt.Retry <= 0 {
		opt.Retry = 200 * time.Millisecond
	}
	if opt.Silence <= 0 {
		opt.Silence = wire.DefaultSilence
	}
	if opt.Metrics == nil {
		opt.Metrics = prom.NewRegistry()
	}
	r := &Receiver{opt: opt, f: newFiles(opt.Out), m: newCounters(opt.Metrics), rt: &route{static: opt.Upstreams}}
	lock, err := r.f.lockDir()
	if err != nil {
		return nil, err
	}
	r.lock = lock
	if r.st, err = r.f.load(); err == nil {
		err = r.f.recover(&r.st)
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	if r.st.Full != nil {
		r.build = &build{run: r.st.Full.Run, open: &wire.StepInfo{To: r.st.Full.To}, record: r.st.Full.Record, full: true}
	}
	if _, err := os.Stat(opt.Out); err != nil {
		r.st.Version = 0 // nothing to claim
	}
	r.m.version.Set(float64(r.st.Version))
	return r, nil
}

// Close drops the connection and releases the folder.
func (r *Receiver) Close() {
	if r.up != nil {
		r.up.close()
	}
	if r.build != nil && r.build.m != nil {
		r.build.m.close(false)
	}
	r.closeSpareMap()
	r.lock.Close()
}

func (r *Receiver) logf(format string, args ...any) {
	if r.opt.Log != nil {
		r.opt.Log.Printf(format, args...)
	}
}

// Version returns the run and version Out holds as far as the receiver knows (0 until verified).
func (r *Receiver) Version() (string, uint64) { return r.st.Run, r.have() }

func (r *Receiver) have() uint64 {
	if r.verified {
		return r.st.Version
	}
	return 0
}

// Run pulls versions until ctx ends, and keeps the receiver in its sender's layout. A failed
// attempt is logged, counted and tried again at once against the next upstream; after a round
// of all of them, after a pause.
func (r *Receiver) Run(ctx context.Context) error {
	go r.join(ctx)
	pause := r.opt.Retry
	for ctx.Err() == nil {
		name := r.upName()
		err := r.once(ctx)
		if err == nil {
			pause = r.opt.Retry
			continue
		}
		if ctx.Err() != nil {
			break
		}
		cause, round := r.fail(err)
		if cause == "route" {
			continue
		}
		if !round {
			r.logf("needle weights recv: %s: %v (%s; trying %s)", name, err, cause, r.upName())
			continue
		}
		r.logf("needle weights recv: %s: %v (%s; again in %s)", name, err, cause, pause)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		pause = min(2*pause, 2*time.Second)
	}
	return nil
}

// upName is the upstream the next attempt goes to (after a route change: the route's first).
func (r *Receiver) upName() string {
	list, gen := r.rt.list()
	if gen != r.upGen {
		return list[0]
	}
	return list[r.upIdx%len(list)]
}

// errRouted ends an attempt that a new route came in the middle of: it goes to the route.
var errRouted = errors.New("a new route")

// Error causes of an attempt. A data error (a record that does not apply, a check that does
// not match) discards the version being built and takes the next version in full; a network
// error keeps it for resuming; a local error (disk) discards it.
type dataError struct{ error }
type localError struct{ error }

func (e dataError) Unwrap() error  { return e.error }
func (e localError) Unwrap() error { return e.error }

// fail handles a failed attempt and returns its cause for the log, and whether every upstream
// was tried since the last pause.
func (r *Receiver) fail(err error) (string, bool) {
	var de dataError
	var le localError
	cause := "network"
	switch {
	case errors.Is(err, errRouted):
		cause = "route"
	case errors.Is(err, wire.ErrAuth) || serverSaid(err, wire.CodeAuth):
		cause = "auth"
	case errors.As(err, &de) || errors.Is(err, wire.ErrCheck):
		cause = "check"
		r.forceFull = true
		r.dropBuild(err)
	case errors.As(err, &le):
		cause = "disk"
		r.dropBuild(err)
	case serverSaid(err, wire.CodeBadRequest):
		cause = "refused"
	case serverSaid(err, wire.CodeNotFound):
		cause = "unknown" // a manifest this upstream does not know: the next may
	}
	if cause != "route" {
		r.m.errors(cause).Add(1)
	}
	if r.up != nil {
		r.up.close()
		r.up = nil
		r.rt.use(nil, false)
	}
	list, gen := r.rt.list()
	if gen != r.upGen { // a new route: start from its first upstream, at once
		r.upIdx, r.upGen = 0, gen
		return cause, false
	}
	if cause != "network" && cause != "auth" && cause != "unknown" {
		return cause, true
	}
	r.upIdx = (r.upIdx + 1) % len(list)
	return cause, r.upIdx == 0
}

// once runs one exchange: connect, verify Out if that is still to do, tell the engine about a
// version it has not taken, wait for a plan, receive it, publish.
func (r *Receiver) once(ctx context.Context) error {
	if _, gen := r.rt.list(); gen != r.upGen {
		r.upIdx, r.upGen = 0, gen
		if r.up != nil && r.up.addr != r.upName() {
			r.up.close()
			r.up = nil
		}
	}
	if r.up == nil {
		up, err := dial(ctx, r.upName(), r.opt.Token, r.opt.Silence)
		if err != nil {
			return err
		}
		r.up = up
	}
	if r.st.Version > 0 && !r.verified {
		if err := r.verify(ctx); err != nil {
			return err
		}
	}
	if r.verified && r.st.Notified != r.st.Version {
		r.notify(ctx)
	}
	hello := wire.Hello{Node: r.opt.Node, Run: r.st.Run, Have: r.have(), Wait: true,
		Full: r.forceFull || r.opt.FullEvery > 0 && r.sinceFull+1 >= r.opt.FullEvery}
	if hello.Have == 0 {
		hello.Run = ""
	}
	if b := r.build; b != nil && b.open != nil {
		hello.Resume = &wire.Resume{Run: b.run, From: b.open.From, To: b.open.To, Record: b.record}
	}
	var plan wire.Plan
	if r.rt.use(r.up, true) != r.upGen {
		return errRouted
	}
	err := r.up.ask(ctx, hello, wire.KindPlan, &plan)
	r.rt.use(r.up, false)
	if err != nil {
		return err
	}
	if !plan.Resumed && r.build != nil {
		r.dropBuild(errors.New("the upstream cannot continue it"))
	}
	start := time.Now()
	var bytes int64
	for i, info := range plan.Steps {
		n, err := r.step(ctx, plan.Run, info, plan.Resumed && i == 0)
		bytes += n
		if err != nil {
			return err
		}
	}
	if len(plan.Steps) == 0 {
		return nil
	}
	return r.commit(ctx, plan, bytes, time.Since(start))
}

// verify checks Out against the manifest of the version the state claims, once after a
// start. A mismatch (the file is not that version) or an upstream without that manifest
// drops the claim: the next pull is full.
func (r *Receiver) verify(ctx context.Context) error {
	var m wire.Manifest
	err := r.up.ask(ctx, wire.Hello{Node: r.opt.Node, Run: r.st.Run, Manifest: r.st.Version}, wire.KindManifest, &m)
	if serverSaid(err, wire.CodeNotFound) {
		if list, _ := r.rt.list(); r.upIdx+1 < len(list) { // a relay may not know it; the sender, last, may
			return err
		}
		return r.dropClaim(fmt.Sprintf("%s no longer knows version %d of run %s", r.up.addr, r.st.Version, r.st.Run))
	}
	if err != nil {
		return err
	}
	l, err := wire.NewChunkMap(m.Header, m.Size, m.Chunk)
	if err != nil || len(m.Hashes) != l.Chunks() {
		return dataError{fmt.Errorf("manifest of version %d: %v (%d hashes)", m.Version, err, len(m.Hashes))}
	}
	data, release, err := mapfile.Map(r.f.out, false, false)
	if err != nil {
		return r.dropClaim(err.Error())
	}
	defer release()
	if why := differs(data, l, m.Hashes, r.opt.Threads); why != "" {
		r.m.errors("base").Add(1)
		return r.dropClaim(fmt.Sprintf("%s is not version %d as its state says: %s", r.f.out, r.st.Version, why))
	}
	r.verified, r.outChunkMap = true, l
	r.serve(m.Hashes, nil)
	r.logf("needle weights recv: %s verified as version %d of run %s", r.f.out, r.st.Version, r.st.Run)
	return nil
}

// differs says how data (a whole file) differs from chunk map l and its manifest, or "".
func differs(data []byte, l *wire.ChunkMap, hashes []uint64, threads int) string {
	if int64(len(data)) != l.Size {
		return fmt.Sprintf("%d bytes, the version has %d", len(data), l.Size)
	}
	if !bytes.Equal(data[:len(l.Header)], l.Header) {
		return "its safetensors header differs"
	}
	got := l.Hash(data, threads)
	for i := range got {
		if got[i] != hashes[i] {
			t, off, _ := l.Span(i)
			return fmt.Sprintf("chunk %d (tensor %q, file byte %d) differs", i, l.Tensors[t].Name, off)
		}
	}
	return ""
}

func (r *Receiver) dropClaim(why string) error {
	r.logf("needle weights recv: not trusting %s as version %d: %s; pulling the newest version in full", r.f.out, r.st.Version, why)
	r.st.Version, r.verified = 0, false
	return r.save()
}

func (r *Receiver) save() error {
	if err := r.f.save(r.st); err != nil {
		return localError{err}
	}
	return nil
}

// commit publishes the version next holds: state first (a crash then finishes the rename),
// rename over Out, re-serve it, tell the engine, make the spare.
func (r *Receiver) commit(ctx context.Context, plan wire.Plan, n int64, took time.Duration) error {
	b := r.build
	if r.opt.VerifyEach {
		if b.manifest == nil { // the sender hashes after a delta step's End: ask for it
			var m wire.Manifest
			if err := r.up.ask(ctx, wire.Hello{Node: r.opt.Node, Run: plan.Run, Manifest: plan.Target}, wire.KindManifest, &m); err != nil {
				return err
			}
			b.manifest = m.Hashes
		}
		if why := differs(b.m.Data, b.chunkMap, b.manifest, r.opt.Threads); why != "" {
			return dataError{fmt.Errorf("version %d as built: %s", plan.Target, why)}
		}
	}
	m := b.m
	if err := m.f.Sync(); err != nil { // unmapped after the engine is told: off the version's path
		return localError{err}
	}
	// The version Out held stays open across the rename: dropping its last name would free its
	// pages inside the rename (1.5B shape, 3.09 GB: 0.6-1.6 s of the rename, two receivers on
	// a 2-core Zen 4 VM) before the engine is told. They are freed after, at idle priority.
	prevOut, openErr := os.Open(r.f.out) // none before the first version
	dropPrev := func() {
		if openErr == nil {
			idle.Run(prevOut.Close)
			openErr = os.ErrClosed
		}
	}
	defer dropPrev()
	r.st.Run, r.st.Version, r.st.Committing, r.st.Full = plan.Run, plan.Target, true, nil
	if err := r.save(); err != nil {
		return err
	}
	if err := os.Rename(r.f.next, r.f.out); err != nil {
		return localError{err}
	}
	b.m = nil
	defer m.close(false)
	if err := atomicfile.SyncDir(r.f.dir); err != nil {
		return localError{err}
	}
	r.st.Committing = false
	if err := r.save(); err != nil {
		return err
	}
	r.build, r.verified, r.outChunkMap = nil, true, b.chunkMap
	kind := "delta"
	if plan.Steps[0].Full() {
		kind, r.sinceFull, r.forceFull = "full", 0, false
	} else {
		r.sinceFull++
	}
	r.m.versions(kind).Add(1)
	r.m.version.Set(float64(plan.Target))
	r.m.seconds.Set(took.Seconds())
	r.serve(b.manifest, b.snap)
	r.notify(ctx)
	r.logf("needle weights recv: version %d (%s, %d step(s), %.1f MB from %s) ready in %.2fs",
		plan.Target, kind, len(plan.Steps), float64(n)/1e6, r.up.addr, took.Seconds())
	if r.opt.Ready != nil {
		r.opt.Ready(plan.Run, plan.Target)
	}
	dropPrev()                                        // before the spare copy: never three versions' pages at once
	if list, _ := r.rt.list(); r.up.addr != list[0] { // back to the preferred upstream for the next version
		r.up.close()
		r.up, r.upIdx = nil, 0
		r.rt.use(nil, false)
	}
	return r.makeSpare()
}

// serve makes Out the re-served snapshot (manifest may be nil: hashed when asked for). grown,
// if not nil, is Out as it was re-served while it arrived (the same file, renamed): it stays.
func (r *Receiver) serve(manifest []uint64, grown *store.Snapshot) {
	if r.opt.Store == nil {
		return
	}
	snap := grown
	if snap == nil {
		f, data, release, err := mapfile.MapOpen(r.f.out, false)
		if err != nil {
			r.logf("needle weights recv: not re-serving %s: %v", r.f.out, err)
			return
		}
		snap = store.NewSnapshot(r.st.Run, r.st.Version, r.outChunkMap, data, release)
		snap.File = f
		r.opt.Store.SetRun(r.st.Run)
		r.opt.Store.AddSnapshot(snap)
	}
	if manifest != nil {
		snap.SetManifest(manifest)
	}
	if r.snap != nil {
		r.opt.Store.Retire(r.snap, false) // its readers keep the old file's pages until they finish
	}
	r.snap = snap
}

// notify tells the engine that Out holds st.Version; a failure is retried before the next pull.
func (r *Receiver) notify(ctx context.Context) {
	if r.opt.Notifier != nil {
		u := Update{Path: r.f.out, Dir: r.f.dir, Run: r.st.Run, Version: r.st.Version}
		if err := r.opt.Notifier.Notify(ctx, u); err != nil {
			r.m.errors("notify").Add(1)
			r.logf("needle weights recv: telling the engine (%s) about version %d: %v", r.opt.Notifier, r.st.Version, err)
			return
		}
	}
	r.st.Notified = r.st.Version
	r.m.notified.Set(float64(r.st.Notified))
	if err := r.save(); err != nil {
		r.logf("needle weights recv: %v", err)
	}
}

// makeSpare copies Out to spare and maps it; without room for it the receiver goes on
// without one.
func (r *Receiver) makeSpare() error {
	if r.opt.NoSpare {
		return nil
	}
	r.closeSpareMap()
	r.st.Spare = 0
	// At idle priority: it must not slow the versions of other receivers on the host.
	if err := idle.Run(func() error { return copyFile(r.f.spare, r.f.out) }); err != nil {
		os.Remove(r.f.spare)
		r.m.errors("disk").Add(1)
		r.logf("needle weights recv: no spare copy (%v): the next delta step copies %s first", err, r.f.out)
		return r.save()
	}
	r.st.Spare = r.st.Version
	if m, err := openMapped(r.f.spare, r.outChunkMap.Size); err == nil {
		r.spareMap = m
	} else {
		r.logf("needle weights recv: spare not mapped ahead (%v): the next delta step maps it", err)
	}
	return r.save()
}

// closeSpareMap unmaps the spare if it is mapped ahead.
func (r *Receiver) closeSpareMap() {
	if r.spareMap != nil {
		r.spareMap.close(false)
		r.spareMap = nil
	}
}

// takeSpareMap returns the spare's mapping made ahead, now next's (renamed), or maps next.
func (r *Receiver) takeSpareMap(size int64) (*mapped, error) {
	if m := r.spareMap; m != nil {
		r.spareMap = nil
		return m, nil
	}
	return openMapped(r.f.next, size)
}

// counters are the receiver's metrics.
type counters struct {
	version, notified, seconds *prom.Value
	received                   func(kind string) *prom.Value
	versions                   func(kind string) *prom.Value
	errors                     func(cause string) *prom.Value
}

func newCounters(reg *prom.Registry) counters {
	return counters{
		version:  reg.Gauge("needle_weights_receiver_version", "version of the receiver's file"),
		notified: reg.Gauge("needle_weights_receiver_notified_version", "the last version the engine was told of and took (its notifier succeeded)"),
		seconds:  reg.Gauge("needle_weights_receiver_update_seconds", "time of the last update, from its plan to the file published"),
		received: func(kind string) *prom.Value {
			return reg.Counter("needle_weights_received_bytes_total", "frame bytes received, by step kind", "kind", kind)
		},
		versions: func(kind string) *prom.Value {
			return reg.Counter("needle_weights_receiver_versions_total", "versions published, by how the first step came", "kind", kind)
		},
		errors: func(cause string) *prom.Value {
			return reg.Counter("needle_weights_receiver_errors_total", "failed attempts and checks, by cause", "cause", cause)
		},
	}
}
