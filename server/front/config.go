package front

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Config renders HAProxy's configuration for the replicas at addrs (host:port each). Why each
// setting (HAProxy 2.6's configuration.txt):
//   - /retrieve and /access only read, so a request is safe to send again to another replica:
//     retry-on conn-failure (refused: a killed replica; connect timeout: a cut one),
//     empty-response (closed with no answer: killed while it searched) and response-timeout (no
//     answer within ServerTimeout: cut while it searched); option redispatch 1 sends every retry
//     to another replica, and retries 3 allows three.
//   - Retrying anything but a failed connect needs the whole request in one buffer: option
//     http-buffer-request waits for the body, and tune.bufsize (1 MiB) holds a Search-R1 turn of
//     2,560 queries (about 300 KB); a larger request is forwarded but never retried. maxconn
//     bounds the buffers' memory.
//   - Health: GET /ready every 500 ms (250 ms while a replica changes state, 1 s while it is
//     down), down after 2 failed checks, up after 2 good ones; a replica that is loading answers
//     503 there and gets nothing until it is ready. observe layer4 with error-limit 1 and
//     on-error mark-down takes a replica out at the first failed connection of live traffic,
//     before its checks fail.
//   - timeout client 10m: Search-R1's requests.post has no timeout and waits for its answer.
func Config(opt Options, addrs []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Written by needle front from the address files of %s (docs/serve.md).
global
    maxconn 2048
    tune.bufsize 1048576

defaults
    mode http
    timeout connect 1s
    timeout client 10m
    timeout server %s
    timeout check 1s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
    option http-buffer-request

frontend needle
    bind %s
    default_backend replicas

backend replicas
    balance leastconn
    option httpchk GET /ready
    default-server check inter 500ms fastinter 250ms downinter 1s fall 2 rise 2 observe layer4 error-limit 1 on-error mark-down
`, opt.AddressDir, haproxyDuration(opt.ServerTimeout), opt.Listen)
	for _, a := range addrs {
		fmt.Fprintf(&b, "    server %s %s\n", serverName(a), a)
	}
	return b.Bytes()
}

// haproxyDuration writes d in milliseconds, HAProxy's default unit.
func haproxyDuration(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

// serverName is a replica's name in HAProxy (letters, digits, '.', '-', '_' and ':' only).
func serverName(addr string) string {
	return "r" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, addr)
}
