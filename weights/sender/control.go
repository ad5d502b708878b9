package sender

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
)

// The control socket (ControlPath, a unix socket in the sender's folder: its permissions are
// the access control) speaks JSON lines: one request per line, one reply per line.
//
//	{"op": "begin", "version": 0, "tensors": [{"name", "dtype", "shape"}...], "metadata": {...}}
//	    -> {"ok": true, "slot": {"version", "path", "size", "offsets": [[begin, end]...]}}
//	       (write each tensor's bytes into path at its offsets, then commit)
//	{"op": "commit"}            -> {"ok": true, "version": v}     (acked at once; encoding runs behind)
//	{"op": "abort"}             -> {"ok": true}
//	{"op": "wait", "version": v} -> {"ok": true, "stats": {...}}  (after v's encode job)
//	{"op": "status"}            -> {"ok": true, "status": {...}}
//
// A failed request answers {"ok": false, "error": "..."}. A connection that closes between
// begin and commit aborts its publish: the half stays empty, the published versions stay.

// request is one control request.
type request struct {
	Op       string            `json:"op"`
	Version  uint64            `json:"version"`
	Tensors  []Tensor          `json:"tensors"`
	Metadata map[string]string `json:"metadata"`
}

// reply is one control reply.
type reply struct {
	OK      bool      `json:"ok"`
	Error   string    `json:"error,omitempty"`
	Slot    *Slot     `json:"slot,omitempty"`
	Version uint64    `json:"version,omitempty"`
	Stats   *JobStats `json:"stats,omitempty"`
	Status  *Status   `json:"status,omitempty"`
}

// ListenControl opens the control socket (replacing a stale one left by a killed sender: the
// folder's lock says no other sender runs) and serves it until ln is closed.
func (s *Sender) ListenControl() (net.Listener, error) {
	os.Remove(s.ControlPath())
	ln, err := net.Listen("unix", s.ControlPath())
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.control(c)
		}
	}()
	return ln, nil
}

// control serves one publisher connection.
func (s *Sender) control(c net.Conn) {
	defer c.Close()
	var slot *Slot
	defer func() {
		if slot != nil {
			s.Abort()
			s.logf("needle weights send: the publisher of version %d left before committing it", slot.Version)
		}
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // a begin lists every tensor
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req request
		var rep reply
		err := json.Unmarshal(sc.Bytes(), &req)
		if err == nil {
			switch req.Op {
			case "begin":
				if slot != nil {
					err = errors.New("begin while this connection's publish is open")
					break
				}
				slot, err = s.Begin(req.Version, req.Tensors, req.Metadata)
				rep.Slot = slot
			case "commit":
				if slot == nil {
					err = errors.New("commit without a begin")
					break
				}
				rep.Version = slot.Version
				err = s.Commit(slot)
				slot = nil
			case "abort":
				if slot != nil {
					s.Abort()
					slot = nil
				}
			case "wait":
				var js JobStats
				js, err = s.Wait(req.Version)
				rep.Stats = &js
			case "status":
				st := s.Status()
				rep.Status = &st
			default:
				err = fmt.Errorf("unknown op %q (begin, commit, abort, wait, status)", req.Op)
			}
		}
		rep.OK = err == nil
		if err != nil {
			rep = reply{Error: err.Error()}
		}
		if enc.Encode(rep) != nil {
			return
		}
	}
}
