package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/valyala/fasthttp"

	"needle/engine"
	"needle/internal/option"
	"needle/server"
	"needle/testkit/browser"
	"needle/testkit/enginetest"
)

// glosses are the served corpus: contents "\"Title\"\ntext" as in the anchors' corpora.
var glosses = []string{
	"\"Horse\"\nsolid-hoofed herbivorous quadruped domesticated since prehistoric times and used for riding",
	"\"Bicycle\"\na wheeled vehicle that has two wheels and is moved by foot pedals",
	"\"Violin\"\nbowed stringed instrument that is the highest member of the violin family",
	"\"Oak\"\na deciduous tree of the genus Quercus with lobed leaves and acorns",
	"\"Mars\"\na small reddish planet that is the 4th from the sun",
	"\"Bread\"\nfood made from dough of flour or meal and usually raised with yeast and baked",
}

const query = "an animal used for riding"

// serve starts a real server (listener and all) over the fake engine parts, with pages, with
// the server's defaults and what set changes.
func serve(t *testing.T, set func(*server.Config)) string {
	t.Helper()
	cfg := option.Defaults[server.Config]()
	set(&cfg)
	enc := &enginetest.HashEncoder{Dimension: 64}
	docs, idx := enginetest.Corpus(enc, glosses)
	pages := enginetest.Pages{"https://en.wikipedia.org/w/index.php?title=Doc0": `{"url":"https://en.wikipedia.org/w/index.php?title=Doc0","contents":"The horse is a domesticated, one-toed, hoofed mammal."}`}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRetriever(enc, idx, docs, pages, "", enginetest.Batcher(engine.BatcherOptions{MaxBatch: 8, OnBatch: s.ObserveBatch}))
	if err != nil {
		t.Fatal(err)
	}
	s.SetRetriever(r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		r.Close()
	})
	return "http://" + ln.Addr().String()
}

// topTitle is the title of /retrieve's best hit for q.
func topTitle(t *testing.T, base, token, q string) string {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(base + "/retrieve")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	body, _ := json.Marshal(map[string]any{"queries": []string{q}, "topk": 3, "return_scores": true})
	req.SetBody(body)
	if err := fasthttp.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() != 200 {
		t.Fatalf("/retrieve: %v %d %s", err, resp.StatusCode(), resp.Body())
	}
	var out struct {
		Result [][]struct {
			Document struct{ Contents string } `json:"document"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp.Body(), &out); err != nil || len(out.Result) != 1 || len(out.Result[0]) == 0 {
		t.Fatalf("/retrieve answer %s: %v", resp.Body(), err)
	}
	title, _, _ := strings.Cut(strings.TrimPrefix(out.Result[0][0].Document.Contents, `"`), "\"\n")
	return title
}

// TestPageInBrowser loads the page in headless Chromium, types a query, and checks that the
// page shows /retrieve's best hit first and the server's state from /metrics. It saves a
// screenshot in the test's artifact folder (go test -artifacts) and logs the first paint of
// a warm server; times are reported, never asserted.
func TestPageInBrowser(t *testing.T) {
	ctx := browser.New(t, time.Minute)
	base := serve(t, func(c *server.Config) {
		c.Info = server.Info{Index: "/demo/index.faiss", Model: "/models/fake", Precision: "fp16"}
	})
	want := topTitle(t, base, "", query)

	// The first load warms the server and the browser; the second is measured.
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#q"))))
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#q"))))
	paint, err := chromedp.Run(ctx, chromedp.Poll[float64](`(performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime`))
	must(t, err)
	nav, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`(({requestStart, responseEnd, domContentLoadedEventEnd}) => ({requestStart, responseEnd, domContentLoadedEventEnd}))(performance.getEntriesByType("navigation")[0])`))
	must(t, err)
	t.Logf("first contentful paint %.1f ms after navigation start (warm server; goal < 100 ms); request sent %.1f ms, page received %.1f ms, DOM ready %.1f ms",
		paint, nav["requestStart"], nav["responseEnd"], nav["domContentLoadedEventEnd"])

	must(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#q"), query), chromedp.Click(chromedp.CSS("#go")), chromedp.WaitVisible(chromedp.CSS("body[data-searched]"))))
	got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#hits li:first-child .title")))
	must(t, err)
	if got != want {
		t.Errorf("the page's first hit is %q, /retrieve's %q", got, want)
	}
	// The state panel: figures of /metrics, refreshed after the search.
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("s-rows").textContent === "6" && document.getElementById("s-ready").textContent === "yes"`))
	must(t, err)
	for id, want := range map[string]string{"#s-index": "/demo/index.faiss", "#s-model": "/models/fake", "#s-precision": "fp16", "#s-pages": "yes (/access)"} {
		if got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(id))); err != nil || got != want {
			t.Errorf("%s shows %q (%v), want %q", id, got, err, want)
		}
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must(t, err)
	path := filepath.Join(t.ArtifactDir(), "search-page.png")
	must(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot %s", path)

	// The page link of the best hit opens its /access row.
	must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#hits li:first-child button.link")), chromedp.WaitVisible(chromedp.CSS("#pageview"))))
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#pagetext"))); err != nil || !strings.Contains(text, "one-toed") {
		t.Errorf("the page view shows %q (%v), want the /access row of the best hit", text, err)
	}
}

// TestPageAsksForToken: with --auth-token the page asks for it, then searches with it.
func TestPageAsksForToken(t *testing.T) {
	ctx := browser.New(t, time.Minute)
	base := serve(t, func(c *server.Config) { c.AuthToken = "s3cret" })
	want := topTitle(t, base, "s3cret", query)
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#auth"))))
	must(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#token"), "s3cret"), chromedp.Click(chromedp.CSS("#auth button")), chromedp.WaitNotVisible(chromedp.CSS("#auth"))))
	must(t, chromedp.Do(ctx, chromedp.Navigate(base+"/?"+fmt.Sprintf("q=%s&k=2", strings.ReplaceAll(query, " ", "+"))), chromedp.WaitVisible(chromedp.CSS("body[data-searched]"))))
	if got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#hits li:first-child .title"))); err != nil || got != want {
		t.Errorf("with the token the first hit is %q (%v), want %q", got, err, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
