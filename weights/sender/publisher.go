package sender

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"needle/safetensors"
)

// Publisher is a Go client of a sender's control socket: what `needle weights publish`, the
// benchmark and the tests publish with. Python trainers use needle_trainer.publish, which
// speaks the same protocol. Not safe for concurrent use.
type Publisher struct {
	c net.Conn
	r *bufio.Reader
}

// Dial connects to the sender whose folder is dir.
func Dial(dir string) (*Publisher, error) {
	c, err := net.Dial("unix", filepath.Join(dir, "control.sock"))
	if err != nil {
		return nil, fmt.Errorf("no sender at %s: %w", dir, err)
	}
	return &Publisher{c: c, r: bufio.NewReader(c)}, nil
}

// Close closes the connection (aborting a publish that was not committed).
func (p *Publisher) Close() error { return p.c.Close() }

func (p *Publisher) call(req request) (reply, error) {
	b, _ := json.Marshal(req)
	if _, err := p.c.Write(append(b, '\n')); err != nil {
		return reply{}, err
	}
	line, err := p.r.ReadBytes('\n')
	if err != nil {
		return reply{}, fmt.Errorf("sender: %w", err)
	}
	var rep reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return reply{}, fmt.Errorf("sender reply: %w", err)
	}
	if !rep.OK {
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

// PublishImage publishes img, a whole safetensors file in memory, as version (0: the next):
// its tensors and metadata are laid out in the sender's half and its data copied there. It
// returns the version once committed (the delta is still being encoded).
func (p *Publisher) PublishImage(img []byte, version uint64) (uint64, error) {
	if len(img) < 8 || binary.LittleEndian.Uint64(img) > uint64(len(img)-8) {
		return 0, errors.New("not a safetensors file")
	}
	hdr := 8 + int64(binary.LittleEndian.Uint64(img))
	tensors, meta, err := safetensors.ParseHeader(img[:hdr], int64(len(img))-hdr)
	if err != nil {
		return 0, err
	}
	req := request{Op: "begin", Version: version, Metadata: meta}
	for _, t := range tensors {
		req.Tensors = append(req.Tensors, Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	rep, err := p.call(req)
	if err != nil {
		return 0, err
	}
	if err := Write(rep.Slot, func(i int) []byte { return img[hdr+tensors[i].Begin : hdr+tensors[i].End] }); err != nil {
		p.call(request{Op: "abort"})
		return 0, err
	}
	rep, err = p.call(request{Op: "commit"})
	return rep.Version, err
}

// Write writes each tensor's bytes, src(i) for tensor i, into the slot's half with pwrite: a
// page of the half that was never written is then filled once, where a copy through a mapping
// would fault it in zeroed first.
func Write(slot *Slot, src func(i int) []byte) error {
	f, err := os.OpenFile(slot.Path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	for i, o := range slot.Offsets {
		b := src(i)
		if int64(len(b)) != o[1]-o[0] {
			err = fmt.Errorf("tensor %d: %d bytes for its %d-byte range in %s", i, len(b), o[1]-o[0], slot.Path)
		} else {
			_, err = f.WriteAt(b, o[0])
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// Wait returns the stats of version's background job once it has finished.
func (p *Publisher) Wait(version uint64) (JobStats, error) {
	rep, err := p.call(request{Op: "wait", Version: version})
	if err != nil {
		return JobStats{}, err
	}
	return *rep.Stats, nil
}
