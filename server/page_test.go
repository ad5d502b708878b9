package server

import (
	"bytes"
	"strings"
	"testing"
)

// TestPage: GET and HEAD / answer the search page, with a policy that forbids fetching
// anything from elsewhere; other methods get the JSON 405; paths near "/" are the JSON 404 of
// any unknown path.
func TestPage(t *testing.T) {
	s, _, _ := testServer(t, Config{AuthToken: "secret"}, false)
	code, body, resp := do(s, "GET", "/", "")
	if code != 200 || !bytes.HasPrefix(body, []byte("<!doctype html>")) || !strings.HasPrefix(string(resp.Header.ContentType()), "text/html") {
		t.Fatalf("GET / with --auth-token: %d %q %.40q, want the page (it holds no data; it asks for the token)", code, resp.Header.ContentType(), body)
	}
	if csp := string(resp.Header.Peek("Content-Security-Policy")); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q: want no fetch but from this server", csp)
	}
	if code, _, _ := do(s, "HEAD", "/", ""); code != 200 {
		t.Errorf("HEAD /: %d", code)
	}
	if code, body, _ := do(s, "POST", "/", "{}"); code != 405 || string(body) != `{"detail":"Method Not Allowed"}` {
		t.Errorf("POST /: %d %s", code, body)
	}
	for _, path := range []string{"/index.html", "/ui", "/x/"} {
		code, body, _ := do(s, "GET", path, "")
		if want := `{"detail":"Not Found"}`; code != 404 || string(body) != want {
			t.Errorf("GET %s: %d %s, want 404 %s", path, code, body, want)
		}
	}
	if code, _, _ := do(s, "GET", "/metrics", ""); code != 401 {
		t.Errorf("GET /metrics without the token: %d, want 401 (the page asks for it)", code)
	}
}

// TestMetricsInfo: /metrics names what is served, the labels escaped for Prometheus; the page
// reads it from there.
func TestMetricsInfo(t *testing.T) {
	for _, pages := range []bool{false, true} {
		s, _, _ := testServer(t, Config{Info: Info{Index: `/data/"x"/index.faiss`, Model: "/m/MiniLM", Precision: "int8"}}, pages)
		_, body, _ := do(s, "GET", "/metrics", "")
		want := `needle_info{index="/data/\"x\"/index.faiss",model="/m/MiniLM",precision="int8",pages="0"} 1`
		if pages {
			want = strings.Replace(want, `pages="0"`, `pages="1"`, 1)
		}
		if !bytes.Contains(body, []byte(want+"\n")) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

// FuzzRoute: any method and path is answered without a 5xx; the page only at GET or HEAD of
// "/", every other answer JSON (the API's answers are never the page).
func FuzzRoute(f *testing.F) {
	for _, seed := range []struct{ method, path string }{
		{"GET", "/"}, {"HEAD", "/"}, {"POST", "/"}, {"GET", "/x"}, {"PUT", "/metrics"}, {"GET", "/%2F"}, {"GET", "/?a=b"}, {"OPTIONS", "*"},
	} {
		f.Add(seed.method, seed.path)
	}
	s, _, _ := testServer(f, Config{}, false)
	f.Fuzz(func(t *testing.T, method, path string) {
		if method == "" || strings.ContainsAny(method, " \r\n") || strings.ContainsAny(path, " \r\n") {
			t.Skip("not an HTTP request line")
		}
		code, body, resp := do(s, method, path, "")
		isPage := strings.HasPrefix(string(resp.Header.ContentType()), "text/html")
		if code >= 500 || (isPage && code != 200) {
			t.Fatalf("%s %q: %d %q", method, path, code, body)
		}
		if !isPage && len(body) > 0 && !bytes.HasPrefix(body, []byte("{")) && !bytes.HasPrefix(body, []byte("#")) {
			t.Fatalf("%s %q: %d neither JSON nor metrics: %.80q", method, path, code, body)
		}
	})
}
