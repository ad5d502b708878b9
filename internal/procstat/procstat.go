// Package procstat reads this process's memory figures from /proc/self/status and its CPU
// time, for the benchmarks' reports and the tests that bound memory.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KB is a field of /proc/self/status in kB: "RssAnon" (heap, stacks), "RssFile" (mapped
// files), "VmRSS", "VmHWM" (peak RSS). 0 when unknown.
func KB(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// CPU is the user + system CPU time of this process so far (all threads); 0 when unknown.
// On a shared machine it is what to compare where wall time swings with the neighbours' load.
func CPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
