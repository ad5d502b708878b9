package lifecycle

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"time"
)

// WitnessGateway as Options.Witness names the default route's gateway, TCP port 9 (discard:
// almost never served, so the gateway's kernel refuses it, and a refusal is an answer).
const WitnessGateway = "gateway"

// witnessPort is the port of the default witness.
const witnessPort = "9"

// witnessFor resolves the Witness setting for a replica advertised on ip: the host:port to
// ask, or "" for none, and why none. A replica on a loopback address has no network to be cut
// from (and its tests must send nothing out of the machine): it has no witness.
func witnessFor(setting, ip string) (addr, why string) {
	if setting == "" {
		return "", "no witness was set"
	}
	if parsed := net.ParseIP(ip); parsed != nil && parsed.IsLoopback() {
		return "", "it serves on a loopback address"
	}
	if setting != WitnessGateway {
		return setting, ""
	}
	gw := defaultGateway()
	if gw == "" {
		return "", "this host has no IPv4 default route"
	}
	return net.JoinHostPort(gw, witnessPort), ""
}

// defaultGateway returns the IPv4 gateway of the default route of this process's network
// namespace (/proc/net/route: destination 00000000, the gateway in little-endian hex), or "".
func defaultGateway() string {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || fields[1] != "00000000" {
			continue
		}
		b, err := hex.DecodeString(fields[2])
		if err != nil || len(b) != 4 || binary.LittleEndian.Uint32(b) == 0 {
			continue
		}
		return net.IPv4(b[3], b[2], b[1], b[0]).String()
	}
	return ""
}

// reaches reports whether addr's host answers a TCP connect within timeout, accepting or
// refusing it: either way this host's link to it works.
func reaches(addr string, timeout time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err == nil {
		c.Close()
	}
	return classify(err) != silent
}
