// Package browser starts the headless Chromium (Debian's chromium, tools/setup.sh) that tests
// drive pages in through the DevTools protocol (chromedp), for the search page's tests.
package browser

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"needle/testkit/testenv"
)

// Env names the variable that overrides the browser binary (default: chromium on PATH).
const Env = "NEEDLE_CHROMIUM"

// New starts a headless Chromium for t and returns a tab's context, ending with t (and after
// timeout). A missing browser skips t, or fails it under NEEDLE_STRICT=1.
func New(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		bin = "chromium"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		testenv.Missing(t, "headless browser "+bin+" (apt chromium, or set "+Env+")")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in containers, where Chromium's sandbox cannot start
		chromedp.WindowSize(1200, 760), chromedp.Flag("disable-dev-shm-usage", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first call starts the browser, which lives as long as that call's context: no
	// timeout on it, only on the tab's later calls.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	ctx, cancelTime := context.WithTimeout(tab, timeout)
	t.Cleanup(cancelTime)
	return ctx
}
