package lifecycle

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"needle/internal/option"

	"golang.org/x/sys/unix"
)

// A restart with no moment without a server (--replace). Search-R1's client posts once per
// turn with no retry, so a restart by stop-then-start (a drain, then a gap while the new
// process loads) fails its trainer; a second needle binding the port beside the first
// (SO_REUSEPORT) would get half the connections while it loads, and the connections queued
// on the first one's socket when it closes are reset. So the running needle hands its
// listening socket itself to its replacement, as nginx's binary upgrade does:
//
//  1. Every needle serve accepts replacements on a unix socket in the abstract namespace
//     named after its TCP address (controlName): the name vanishes with the process and
//     lives in the network namespace, as the port does. Only a process of the same user is
//     answered (SO_PEERCRED).
//  2. `needle serve --replace` connects to it and receives, by SCM_RIGHTS, the TCP listening
//     socket and the control socket. The old process goes on serving while the new one loads.
//  3. Once ready, the new one serves on the same socket (the kernel's queue of connections
//     is shared: none is refused or reset), writes its address file, and sends "ready". The
//     old one then drains as on SIGTERM and exits.
//
// If the new process fails or is stopped before it is ready, its connection closes and the
// old one serves on as if nothing happened. A needle still loading refuses to be replaced.

// controlName is the abstract unix socket of the needle serving the TCP address addr.
func controlName(addr *net.TCPAddr) string { return "@needle-serve-" + addr.String() }

// handoverProtocol is the first line a replacement sends.
const handoverProtocol = "needle-replace 1"

// handover answers replacement requests for one process's listening socket.
type handover struct {
	tcp      *net.TCPListener
	ctl      *net.UnixListener
	ready    atomic.Bool // the process serves (a loading one refuses to be replaced)
	busy     atomic.Bool // a replacement is loading
	replaced chan int    // the pid of the replacement that is serving (once)
	log      func(format string, a ...any)
}

// listenControl opens the control socket of the needle serving addr. addr is the address
// as --host and --port name it (serveAddr), which is what a replacement knows: a wildcard
// listener's own address reads [::] for --host 0.0.0.0.
func listenControl(addr *net.TCPAddr) (*net.UnixListener, error) {
	return net.ListenUnix("unix", &net.UnixAddr{Name: controlName(addr), Net: "unix"})
}

// serveHandover answers replacement requests on ctl for tcp until ctl is closed, with a line
// to log for each replacement's steps.
func serveHandover(tcp *net.TCPListener, ctl *net.UnixListener, log func(format string, a ...any)) *handover {
	h := &handover{tcp: tcp, ctl: ctl, replaced: make(chan int, 1), log: log}
	go func() {
		for {
			c, err := ctl.AcceptUnix()
			if err != nil {
				return // closed: replaced, or exiting
			}
			go h.answer(c)
		}
	}()
	return h
}

// answer serves one replacement request on c.
func (h *handover) answer(c *net.UnixConn) {
	defer c.Close()
	pid, err := peerPID(c)
	if err != nil {
		fmt.Fprintf(c, "refused: %v\n", err)
		return
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != handoverProtocol {
		fmt.Fprintf(c, "refused: expected %q\n", handoverProtocol)
		return
	}
	if !h.ready.Load() {
		fmt.Fprintf(c, "refused: pid %d is still loading (stop it and start the new server, or wait until it is ready)\n", os.Getpid())
		return
	}
	if !h.busy.CompareAndSwap(false, true) {
		fmt.Fprintf(c, "refused: pid %d is being replaced by another process, or draining\n", os.Getpid())
		return
	}
	if err := sendListeners(c, fmt.Sprintf("ok %d\n", os.Getpid()), h.tcp, h.ctl); err != nil {
		h.log("handing the socket to pid %d: %v", pid, err)
		h.busy.Store(false)
		return
	}
	h.log("pid %d took a copy of the listening socket to replace this server; serving until it is ready", pid)
	c.SetReadDeadline(time.Time{}) // its load may take minutes
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		h.log("pid %d left before it was ready; still serving", pid)
		h.busy.Store(false)
		return
	}
	h.close() // busy stays set: the replacement answers the next request
	h.replaced <- pid
}

// close stops answering replacement requests (replaced, or draining); a replacement that
// holds the sockets already goes on.
func (h *handover) close() {
	h.busy.Store(true)
	h.ctl.Close()
}

// peerPID returns the pid of c's peer, which must run as this process's user.
func peerPID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	if int(cred.Uid) != os.Geteuid() {
		return 0, fmt.Errorf("pid %d runs as uid %d, this server as %d", cred.Pid, cred.Uid, os.Geteuid())
	}
	return int(cred.Pid), nil
}

// sendListeners writes msg with the descriptors of tcp and ctl attached (SCM_RIGHTS: the
// kernel installs copies in the receiver; this process keeps its own).
func sendListeners(c *net.UnixConn, msg string, tcp *net.TCPListener, ctl *net.UnixListener) error {
	tcpRaw, err := tcp.SyscallConn()
	if err != nil {
		return err
	}
	ctlRaw, err := ctl.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	err = tcpRaw.Control(func(tfd uintptr) {
		sendErr = ctlRaw.Control(func(cfd uintptr) {
			_, _, sendErr = c.WriteMsgUnix([]byte(msg), unix.UnixRights(int(tfd), int(cfd)), nil)
		})
	})
	return errors.Join(err, sendErr)
}

// takeover is a replacement's hold on the sockets of the needle it replaces.
type takeover struct {
	conn *net.UnixConn
	tcp  *net.TCPListener
	ctl  *net.UnixListener
	pid  int // the needle being replaced
}

// takeOver asks the needle serving addr for its sockets. It returns nil, nil when no needle
// answers on addr's control socket (the caller binds the port itself).
func takeOver(addr *net.TCPAddr) (*takeover, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: controlName(addr), Net: "unix"})
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, nil
	}
	if err != nil {
		return nil, option.Wrap("Replace", err)
	}
	t, err := receiveListeners(c)
	if err != nil {
		c.Close()
		return nil, option.Wrap("Replace", fmt.Errorf("the needle serving %s: %w", addr, err))
	}
	return t, nil
}

// receiveListeners sends the request on c and reads the answer and its descriptors.
func receiveListeners(c *net.UnixConn) (*takeover, error) {
	if _, err := peerPID(c); err != nil { // a socket of another user's process is not a needle of ours
		return nil, err
	}
	if _, err := fmt.Fprintln(c, handoverProtocol); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(2*4))
	n, oobn, _, _, err := c.ReadMsgUnix(msg, oob)
	if err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Time{})
	var fds []int
	if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(cmsgs) == 1 {
		fds, _ = unix.ParseUnixRights(&cmsgs[0])
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "needle-handover")
		defer files[i].Close() // the listeners below hold copies
	}
	answer := strings.TrimSpace(string(msg[:n]))
	pid, err := strconv.Atoi(strings.TrimPrefix(answer, "ok "))
	if !strings.HasPrefix(answer, "ok ") || err != nil || len(files) != 2 {
		return nil, errors.New(strings.TrimPrefix(answer, "refused: "))
	}
	tcp, err := net.FileListener(files[0])
	if err != nil {
		return nil, err
	}
	ctl, err := net.FileListener(files[1])
	if err != nil {
		tcp.Close()
		return nil, err
	}
	t := &takeover{conn: c, pid: pid}
	var ok bool
	if t.tcp, ok = tcp.(*net.TCPListener); !ok {
		tcp.Close()
		ctl.Close()
		return nil, fmt.Errorf("handed a %T, not a TCP listener", tcp)
	}
	if t.ctl, ok = ctl.(*net.UnixListener); !ok {
		tcp.Close()
		ctl.Close()
		return nil, fmt.Errorf("handed a %T, not a unix listener", ctl)
	}
	return t, nil
}

// ready tells the replaced needle that this one serves: it drains and exits.
func (t *takeover) ready() error {
	defer t.conn.Close()
	_, err := fmt.Fprintln(t.conn, "ready")
	return err
}
