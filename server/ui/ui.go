// Package ui is the search page `needle serve` answers GET / with: a query box, the hits of
// /retrieve with scores and titles, a page view through /access where the server has pages,
// and the server's state read from /metrics, the one source of its figures (docs/search-page.md).
// It is one static file embedded in the binary: no build step, no external fetch (the
// Content-Security-Policy forbids any), the same for every backend. The page holds no data,
// so it is served without the bearer token; it asks for the token when /metrics or /retrieve
// answers 401 and keeps it in the tab's sessionStorage.
package ui

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

//go:embed index.html
var page []byte

// csp lets the page run its own inline script and style and talk to its own server only.
const csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Write answers a GET or HEAD of the page.
func Write(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Content-Security-Policy", csp)
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBody(page)
}
