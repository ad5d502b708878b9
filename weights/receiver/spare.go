package receiver

import (
	"os"
	"time"

	"needle/internal/idle"
)

// The spare is a copy of Out made after each version, so that the next delta step starts from
// it (a rename) instead of copying Out on the version's way. It is made in the background, at
// idle priority, while the receiver already waits for the next version: a version published
// meanwhile is planned at once (and relayed to the hosts below at once), and only the step that
// opens waits for the spare, as do the next spare and Close. The job touches files alone; the
// state takes its result on the receiver's goroutine (awaitSpare; at a beat while the receiver
// waits: spareIfMade).

// spareJob is a spare being made of Out's version.
type spareJob struct {
	version uint64
	done    chan struct{}
	err     error   // the copy failed: no spare
	m       *mapped // spare, mapped with its page tables filled (nil: mapErr)
	mapErr  error
}

// startSpare makes the spare of Out in the background, after closing prev (the file Out was
// before the last rename, which holds the previous version's pages: freed first, so that three
// versions' pages are never held at once). With Options.NoSpare it only closes prev.
func (r *Receiver) startSpare(prev *os.File) {
	drop := func() {
		if prev != nil {
			idle.Run(prev.Close)
		}
	}
	if r.opt.NoSpare {
		go drop()
		return
	}
	r.awaitSpare()
	r.closeSpareMap()
	job := &spareJob{version: r.st.Version, done: make(chan struct{})}
	spare, out, size := r.f.spare, r.f.out, r.outChunkMap.Size
	go func() {
		defer close(job.done)
		start := time.Now()
		drop()
		if job.err = idle.Run(func() error { return copyFile(spare, out) }); job.err == nil {
			job.m, job.mapErr = openMapped(spare, size)
			r.logf("needle weights recv: spare of version %d made in %.2fs", job.version, time.Since(start).Seconds())
		}
	}()
	r.spare = job
}

// awaitSpare waits for the spare being made, if any, and records it in the state; without
// room for it the receiver goes on without one.
func (r *Receiver) awaitSpare() {
	job := r.spare
	if job == nil {
		return
	}
	<-job.done
	r.spare = nil
	if job.err != nil {
		os.Remove(r.f.spare)
		r.m.errors("disk").Add(1)
		r.logf("needle weights recv: no spare copy (%v): the next delta step copies %s first", job.err, r.f.out)
		return
	}
	if job.m != nil {
		r.spareMap = job.m
	} else {
		r.logf("needle weights recv: spare not mapped ahead (%v): the next delta step maps it", job.mapErr)
	}
	r.st.Spare = job.version
	if err := r.save(); err != nil {
		r.logf("needle weights recv: %v", err)
	}
}

// spareIfMade records the spare being made if it is done (awaitSpare without the wait): called
// at the upstream's beats while the receiver waits for a version, so that the state says so
// within a beat of it, as a restart and the benchmark's wait for spares read it.
func (r *Receiver) spareIfMade() {
	if r.spare == nil {
		return
	}
	select {
	case <-r.spare.done:
		r.awaitSpare()
	default:
	}
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
