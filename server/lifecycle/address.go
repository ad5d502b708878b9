package lifecycle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"needle/internal/atomicfile"
	"needle/internal/option"
)

// The --save-address-to file, as ASearcher's client (AReaL's AsyncSearchBrowserClient) reads
// it: it globs DIR/Host*_IP*.txt and picks one line with random.choice, when it is created and
// again after every failed call (outside its try, 10 s apart, 10 attempts). An empty folder at
// either moment raises IndexError and ends the rollout; a file whose port refuses connections
// costs the client a failed call and a 10 s sleep. So a file exists exactly while its port
// accepts connections, except the folder's last one:
//   - written as soon as the port listens, before the index loads (requests are held until
//     ready, --load-wait; past it 503 + Retry-After, which the client retries);
//   - withdrawn when the drain begins (SIGTERM, or a --replace successor took over), before
//     the listener closes: removed, unless it is the last address file of the folder: then it
//     stays, so a client retries it until a server comes back, and a marker (leftPrefix + its
//     name, a dot file the client's glob does not see) lets the next needle that writes into
//     the folder remove it;
//   - never removed when another process wrote a file of the same name in its place (a
//     --replace successor on the same address rewrites it once ready, before the old needle
//     drains, so the file stays across the handover).
// The decision "last file or not" and the write are taken under an flock of lockName in the
// folder, so servers stopped together (one SIGTERM to a whole job) cannot all see another's
// file and all remove theirs. A folder where the lock cannot be taken (a file system without
// flock) is used without it.
// A needle stopped while its --replace successor is still loading withdraws its file too: the
// kernel queues connections on the shared socket until the successor serves and writes its own.

// leftPrefix starts the name of the marker of an address file a needle kept as the folder's last.
const leftPrefix = ".needle-left-"

// lockName is the folder's lock file (a dot file: the clients' glob does not see it).
const lockName = ".needle-lock"

// lockFolder takes the folder's lock (see above) and returns its release; best effort.
func lockFolder(dir string) func() {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return func() {}
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX) != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing releases the flock
}

// Addresses reads the folder as ASearcher's client does (DIR/Host*_IP*.txt): the address
// each file holds, by path. Files that vanish while it reads are left out.
func Addresses(dir string) (map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(dir, addressGlob))
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			out[n] = string(b)
		}
	}
	return out, nil
}

// addressGlob matches the address files in a folder, as the client's glob does.
const addressGlob = "Host*_IP*.txt"

// addressFile is this process's address file and what it wrote into it.
type addressFile struct {
	path    string
	content []byte
	info    os.FileInfo // the file as written: another process's file of the same name differs
}

// writeAddress writes DIR/Host{ip}_IP{port}.txt = "{ip}:{port}" (no newline: the client does
// not strip it) atomically, then removes the files earlier needle processes left for lack of
// another server. It returns what it did for the log.
func writeAddress(dir, hostPort, host string, port int) (*addressFile, []string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, option.Wrap("SaveAddressTo", err)
	}
	defer lockFolder(dir)()
	a := &addressFile{path: filepath.Join(dir, fmt.Sprintf("Host%s_IP%d.txt", host, port)), content: []byte(hostPort)}
	if err := a.write(); err != nil {
		return nil, nil, option.Wrap("SaveAddressTo", err)
	}
	log := []string{"wrote " + a.path}
	markers, _ := filepath.Glob(filepath.Join(dir, leftPrefix+"*"))
	for _, m := range markers {
		left := filepath.Join(dir, strings.TrimPrefix(filepath.Base(m), leftPrefix))
		was, _ := os.ReadFile(m)
		now, err := os.ReadFile(left)
		// Only the file as needle left it: a server that rewrote it since owns it.
		if left != a.path && err == nil && bytes.Equal(was, now) {
			if os.Remove(left) == nil {
				log = append(log, "removed "+left+", left by a needle that exited with no other server in the folder")
			}
		}
		os.Remove(m)
	}
	return a, log, nil
}

// write (re)writes the file and remembers it as written; the caller holds the folder's lock.
func (a *addressFile) write() error {
	if err := atomicfile.Write(a.path, a.content); err != nil {
		return err
	}
	info, err := os.Stat(a.path)
	if err != nil {
		return err
	}
	a.info = info
	return nil
}

// withdraw is called once the port is about to stop accepting connections (the drain, or
// an exit), before the listener closes: it removes the file unless another process wrote one
// in its place or it is the folder's last address file (then it stays, with a marker). It
// returns what it did for the log.
func (a *addressFile) withdraw() (string, error) {
	defer lockFolder(filepath.Dir(a.path))()
	info, err := os.Stat(a.path)
	if err != nil || !os.SameFile(info, a.info) {
		return "left " + a.path + " alone: another process wrote it", nil
	}
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(a.path), addressGlob))
	if len(others) <= 1 {
		marker := filepath.Join(filepath.Dir(a.path), leftPrefix+filepath.Base(a.path))
		if err := atomicfile.Write(marker, a.content); err != nil {
			return "", option.Wrap("SaveAddressTo", err)
		}
		return "kept " + a.path + ": it is the folder's last address file, and clients that find the folder empty crash " +
			"(IndexError); the next needle that writes into the folder removes it", nil
	}
	if err := os.Remove(a.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", option.Wrap("SaveAddressTo", err)
	}
	return "removed " + a.path, nil
}
