// Package e2e runs the real `needle` binary on a small real index (WordNet passages encoded
// with all-MiniLM-L6-v2 by `needle build`) and drives `needle serve` with the Python clients
// of the training stacks (requests, aiohttp), checking every response against the request model
// they share (Search-R1's search_r1/search/retrieval_server.py) and the scores against a direct
// faissgo search.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"needle/encoder/bert"
	"needle/faissgo"
	"needle/testkit/testenv"
)

const passages = 300 // corpus rows: enough for distinct answers, quick to encode on 2 cores

// fixture is the built binary, corpus, pages file and index the tests serve.
type fixture struct {
	bin, dir, corpus, pages, index string
	rows                           []map[string]any // parsed corpus rows, row i = line i
	queries                        []string         // distinct WordNet example sentences
	oracle                         map[string]hits  // query -> direct faissgo top 5
}

// hits are one query's best rows and scores, best first.
type hits struct {
	labels []int64
	scores []float32
}

// run executes a command and returns its stdout, failing t with its stderr.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// shared is the fixture every test of this process serves: built by the first newFixture
// (a go build, a corpus, a MiniLM build: a minute of both cores), removed by TestMain.
var shared struct {
	sync.Mutex
	fx *fixture
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.fx != nil {
		os.RemoveAll(shared.fx.dir)
	}
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// binary is the needle binary every test of this process runs, built by the first
// needleBinary and removed by TestMain.
var binary struct {
	sync.Mutex
	dir, path string
}

func needleBinary(t *testing.T) string {
	binary.Lock()
	defer binary.Unlock()
	if binary.path == "" {
		dir, err := os.MkdirTemp("", "needle-e2e-bin")
		if err != nil {
			t.Fatal(err)
		}
		binary.dir = dir
		run(t, "go", "build", "-o", filepath.Join(dir, "needle"), "../cmd/needle")
		binary.path = filepath.Join(dir, "needle")
	}
	return binary.path
}

// newFixture returns the shared fixture, building it on the first call. The tests only read
// it (servers write the corpus's offsets sidecar beside it, atomically, the same bytes).
func newFixture(t *testing.T) *fixture {
	shared.Lock()
	defer shared.Unlock()
	if shared.fx == nil {
		dir, err := os.MkdirTemp("", "needle-e2e")
		if err != nil {
			t.Fatal(err)
		}
		built := false
		defer func() {
			if !built {
				os.RemoveAll(dir)
			}
		}()
		shared.fx = buildFixture(t, dir)
		built = true
	}
	return shared.fx
}

// buildFixture builds the binary, the corpus, the pages file and the index into dir.
func buildFixture(t *testing.T, dir string) *fixture {
	model := testenv.MiniLMDir(t)
	wordnet := testenv.WordNetDir(t)
	testenv.Python(t)
	fx := &fixture{dir: dir}
	fx.bin = needleBinary(t)
	wn := filepath.Join(fx.dir, "wordnet")
	run(t, "go", "run", "../tools/wordnet", "--dict", wordnet, "--out", wn, "--limit", fmt.Sprint(passages))

	// ASearcher reads r["url"]: give every row one; the pages file holds the same pages.
	lines, err := os.ReadFile(filepath.Join(wn, "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus, pages bytes.Buffer
	for i, line := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		url := fmt.Sprintf("https://en.wikipedia.org/w/index.php?title=WordNet_%d", i)
		row := strings.TrimSuffix(line, "}") + fmt.Sprintf(`,"url":%q}`, url)
		var parsed map[string]any
		if err := json.Unmarshal([]byte(row), &parsed); err != nil {
			t.Fatalf("corpus line %d: %v", i+1, err)
		}
		fx.rows = append(fx.rows, parsed)
		corpus.WriteString(row + "\n")
		fmt.Fprintf(&pages, `{"url":%q,"contents":%q}`+"\n", url, parsed["contents"])
	}
	fx.corpus, fx.pages = filepath.Join(fx.dir, "corpus.jsonl"), filepath.Join(fx.dir, "pages.jsonl")
	if err := os.WriteFile(fx.corpus, corpus.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fx.pages, pages.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(wn, "queries.jsonl"))))), "\n") {
		var q struct{ Query string }
		if err := json.Unmarshal([]byte(line), &q); err != nil {
			t.Fatal(err)
		}
		if !seen[q.Query] {
			seen[q.Query] = true
			fx.queries = append(fx.queries, q.Query)
		}
	}
	if len(fx.queries) < 40 {
		t.Fatalf("only %d distinct queries in the WordNet sample", len(fx.queries))
	}
	fx.index = filepath.Join(fx.dir, "index")
	run(t, fx.bin, "build", "--corpus", fx.corpus, "--model", model, "--out", fx.index, "--prefix", "")
	fx.oracle = directSearch(t, model, filepath.Join(fx.index, "index.faiss"), fx.queries)
	return fx
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// directSearch is the oracle: the queries encoded in-process and searched with faissgo.
func directSearch(t *testing.T, model, indexFile string, queries []string) map[string]hits {
	enc, err := bert.Load(model, bert.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := faissgo.Read(indexFile, false)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	vecs, err := enc.Encode(queries, "")
	if err != nil {
		t.Fatal(err)
	}
	const k = 5
	dist, labels := make([]float32, len(queries)*k), make([]int64, len(queries)*k)
	if err := idx.Search(vecs, k, dist, labels); err != nil {
		t.Fatal(err)
	}
	out := map[string]hits{}
	for i, q := range queries {
		out[q] = hits{labels[i*k : (i+1)*k], dist[i*k : (i+1)*k]}
	}
	return out
}

// server is one running `needle serve`.
type server struct {
	cmd         *exec.Cmd
	addr        string // host:port from the address file
	addressFile string
	log         *syncBuffer
	exited      chan error
	http        *http.Client // the test's way to it (another network namespace: replicas_test.go)
}

// syncBuffer is a log written by the process's stderr copier and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start runs `needle serve` on a free port and waits until it is ready.
func (fx *fixture) start(t *testing.T, args ...string) *server {
	s := fx.launch(t, filepath.Join(t.TempDir(), "addresses"), 0, args...)
	s.waitReady(t)
	return s
}

// launch runs `needle serve` on port (0: a free one) and returns once its address file is
// in addrDir (written as soon as the port listens, before the index is loaded).
func (fx *fixture) launch(t *testing.T, addrDir string, port int, args ...string) *server {
	return fx.launchWith(t, exec.Command, http.DefaultClient, addrDir, port, args...)
}

// launchWith is launch with the command made by command and the server reached through client.
func (fx *fixture) launchWith(t *testing.T, command func(string, ...string) *exec.Cmd, client *http.Client, addrDir string, port int, args ...string) *server {
	args = append([]string{"serve", "--index_path", fx.index, "--corpus_path", fx.corpus, "--port", fmt.Sprint(port),
		"--save-address-to", addrDir}, args...)
	s := &server{cmd: command(fx.bin, args...), log: &syncBuffer{}, exited: make(chan error, 1), http: client}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
	})
	wrote := regexp.MustCompile(`wrote (\S+Host\S+_IP\d+\.txt)\n`)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-s.exited:
			t.Fatalf("needle serve exited before it wrote its address file: %v\n%s", err, s.log)
		case <-time.After(20 * time.Millisecond):
		}
		if m := wrote.FindStringSubmatch(s.log.String()); m != nil {
			s.addressFile = m[1]
			s.addr = string(must(os.ReadFile(m[1])))
			host, port, _ := strings.Cut(s.addr, ":")
			if want := fmt.Sprintf("Host%s_IP%s.txt", host, port); filepath.Base(m[1]) != want || strings.ContainsAny(s.addr, "\n ") {
				t.Fatalf("address file %s holds %q: want name %s and no newline", m[1], s.addr, want)
			}
			return s
		}
	}
	t.Fatalf("no address file after 3 minutes\n%s", s.log)
	return nil
}

// waitReady polls GET /ready until it answers 200.
func (s *server) waitReady(t *testing.T) {
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := s.http.Get("http://" + s.addr + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	t.Fatalf("not ready after 3 minutes\n%s", s.log)
}

// signalExit sends sig and waits up to a minute for the exit, returning its error.
func (s *server) signalExit(t *testing.T, sig os.Signal) error {
	s.cmd.Process.Signal(sig)
	return s.waitExit(t)
}

// stop sends SIGTERM and checks the clean exit; the address file stays when it is the
// folder's last (clients that find the folder empty crash), else it is removed.
func (s *server) stop(t *testing.T) {
	before := must(filepath.Glob(filepath.Join(filepath.Dir(s.addressFile), "Host*_IP*.txt")))
	if err := s.signalExit(t, syscall.SIGTERM); err != nil {
		t.Errorf("needle serve after SIGTERM: %v\n%s", err, s.log)
	}
	_, err := os.Stat(s.addressFile)
	kept := err == nil && strings.Contains(s.log.String(), "kept "+s.addressFile)
	if kept != (len(before) == 1) {
		t.Errorf("after exit: address file kept=%v, address files in the folder before %v\n%s", kept, before, s.log)
	}
}

// python runs an e2e/clients script with the venv interpreter and decodes its JSON output.
func python(t *testing.T, out any, script string, args ...string) {
	t.Helper()
	b := run(t, testenv.Python(t), append([]string{filepath.Join("clients", script)}, args...)...)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s printed %.300q: %v", script, b, err)
	}
}

// writeJSON writes v to a new file in dir and returns its path.
func writeJSON(t *testing.T, v any) string {
	path := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(path, must(json.Marshal(v)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkHit checks that the hit at rank of query q is the oracle's row (a near tie may
// swap neighbors) and, if score is not nil, that its score matches.
func (fx *fixture) checkHit(t *testing.T, q string, rank int, doc map[string]any, score *float64) {
	t.Helper()
	want := fx.oracle[q]
	row := want.labels[rank]
	tied := (rank > 0 && want.scores[rank-1]-want.scores[rank] < 1e-4) ||
		(rank+1 < len(want.scores) && want.scores[rank]-want.scores[rank+1] < 1e-4)
	if id, _ := doc["id"].(string); id != fmt.Sprint(row) && !tied {
		t.Fatalf("query %q rank %d: document id %v, want row %d", q, rank, doc["id"], row)
	}
	var id int
	fmt.Sscan(doc["id"].(string), &id)
	if !equalJSON(doc, fx.rows[id]) {
		t.Fatalf("query %q rank %d: document %v is not corpus row %d %v", q, rank, doc, id, fx.rows[id])
	}
	if score != nil && math.Abs(*score-float64(want.scores[rank])) > 1e-4 {
		t.Fatalf("query %q rank %d: score %v, want %v (direct faissgo search)", q, rank, *score, want.scores[rank])
	}
}

func equalJSON(a, b any) bool {
	return bytes.Equal(must(json.Marshal(a)), must(json.Marshal(b)))
}

type scored struct {
	Document map[string]any `json:"document"`
	Score    float64        `json:"score"`
}

func checkScoredLists(t *testing.T, fx *fixture, queries []string, result [][]scored, k int) {
	t.Helper()
	if len(result) != len(queries) {
		t.Fatalf("%d result lists for %d queries", len(result), len(queries))
	}
	for i, list := range result {
		if len(list) != k {
			t.Fatalf("query %d: %d hits, want %d", i, len(list), k)
		}
		for j, h := range list {
			if j > 0 && h.Score > list[j-1].Score {
				t.Fatalf("query %d: scores not descending: %v then %v", i, list[j-1].Score, h.Score)
			}
			fx.checkHit(t, queries[i], j, h.Document, &h.Score)
		}
	}
}

// checkASearcher runs ASearcher's pattern against the servers of address folder addrDir (the
// client picks one from the folder): 40 queries one per request, then /access of a page of the
// corpus and of one that is not there; the servers must have been given --pages_path fx.pages.
func (fx *fixture) checkASearcher(t *testing.T, addrDir string) {
	queries := fx.queries[:40]
	urls := []string{
		strings.Replace(fx.rows[7]["url"].(string), "index.php?title=", "index.php/", 1),
		"https://en.wikipedia.org/w/index.php?title=Not_a_page",
	}
	var got struct {
		Retrieve [][]map[string]any
		Access   []map[string]any
	}
	python(t, &got, "asearcher.py", addrDir, writeJSON(t, queries), writeJSON(t, urls))
	if len(got.Retrieve) != len(queries) {
		t.Fatalf("%d answers for %d queries", len(got.Retrieve), len(queries))
	}
	for i, list := range got.Retrieve {
		if len(list) != 5 {
			t.Fatalf("query %d: %d rows, want topk 5", i, len(list))
		}
		for j, r := range list {
			row := fx.rows[fx.oracle[queries[i]].labels[j]]
			if r["contents"] != row["contents"] || r["url"] != row["url"] {
				if s := fx.oracle[queries[i]].scores; !(j > 0 && s[j-1]-s[j] < 1e-4) && !(j < 4 && s[j]-s[j+1] < 1e-4) {
					t.Fatalf("query %q rank %d: got %v, want contents/url of row %d", queries[i], j, r, fx.oracle[queries[i]].labels[j])
				}
			}
		}
	}
	if len(got.Access) != 2 || got.Access[0]["url"] != fx.rows[7]["url"] || got.Access[0]["contents"] != fx.rows[7]["contents"] || got.Access[1] != nil {
		t.Fatalf("/access answered %v, want [page of row 7, null]", got.Access)
	}
}

func TestServeWithRealClients(t *testing.T) {
	fx := newFixture(t)
	srv := fx.start(t, "--pages_path", fx.pages, "--topk", "3", "--retriever_name", "all-MiniLM-L6-v2")
	url := "http://" + srv.addr

	t.Run("SearchR1OnePostOf2560Queries", func(t *testing.T) {
		queries := make([]string, 2560)
		for i := range queries {
			queries[i] = fx.queries[i%len(fx.queries)]
		}
		var result [][]scored
		python(t, &result, "searchr1.py", url, writeJSON(t, queries), "3")
		checkScoredLists(t, fx, queries, result, 3)
	})

	t.Run("ASearcherOneQueryPerRequestViaAddressFile", func(t *testing.T) {
		fx.checkASearcher(t, filepath.Dir(srv.addressFile))
	})

	t.Run("ClientMistakesAreJSON4xx", func(t *testing.T) {
		for body, want := range map[string]int{`{"topk":3}`: 422, `{"queries":"x"}`: 422, `{"queries":[1]}`: 422, `{"queries":`: 422} {
			resp, err := http.Post(url+"/retrieve", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var d struct{ Detail []map[string]any }
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if resp.StatusCode != want || err != nil || len(d.Detail) != 1 {
				t.Errorf("%s: %d (%v), want %d with a detail list", body, resp.StatusCode, err, want)
			}
		}
	})

	t.Run("HealthReadyMetrics", func(t *testing.T) {
		for path, want := range map[string]string{"/health": `{"status":"ok"}`, "/ready": `{"status":"ready"}`} {
			resp, err := http.Get(url + path)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || b.String() != want {
				t.Errorf("GET %s: %d %s", path, resp.StatusCode, b.String())
			}
		}
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`needle_requests_total{endpoint="retrieve",code="200"}`, `needle_requests_total{endpoint="retrieve",code="422"} 4`,
			"needle_batch_queries_count", fmt.Sprintf("needle_index_vectors %d", passages), "needle_queue_queries 0"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
	srv.stop(t)

	// verl's own client from 120 concurrent callers against a server with a tiny queue: requests beyond it
	// get 503 + Retry-After, the clients retry, and every caller gets a correct answer.
	t.Run("Verl120ConcurrentCallersWithBackpressure", func(t *testing.T) {
		srv := fx.start(t, "--max-queued", "16", "--max-batch", "8")
		queries := make([]string, 120)
		for i := range queries {
			queries[i] = fx.queries[i%len(fx.queries)]
		}
		var got [][]scored
		python(t, &got, "verl.py", filepath.Join(testenv.Cache(), "clients"), "http://"+srv.addr, writeJSON(t, queries), "120")
		checkScoredLists(t, fx, queries, got, 3)
		t.Logf("120 concurrent callers of verl's own client: %s answers 503 retried (queue of 16 queries)",
			srv.metric(t, `needle_requests_total{endpoint="retrieve",code="503"}`))
		srv.stop(t)
	})
	// The client loops mostly wait (their retry sleeps, the gaps the tests hold): side by side.
	t.Run("Lifecycle", func(t *testing.T) {
		t.Run("ClientsSurviveStartBeforeReadyDrainAndRestart", func(t *testing.T) { t.Parallel(); testClientsSurviveLifecycle(t, fx) })
		t.Run("ClientsWithSearchR1SurviveHeldStartAndReplace", func(t *testing.T) { t.Parallel(); testClientsSurviveReplace(t, fx) })
	})
	t.Run("DisconnectDropsQueries", func(t *testing.T) { testDisconnectDropsQueries(t, fx) })
	t.Run("SingleQueryOvertakesAPost", func(t *testing.T) { testSingleQueryOvertakesAPost(t, fx) })
	t.Run("Signals", func(t *testing.T) { testSignals(t, fx) })
}

// freePort returns a loopback port nothing listens on (a restarted server takes the same one).
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// metric reads one sample of the server's /metrics ("" when absent).
func (s *server) metric(t *testing.T, sample string) string {
	t.Helper()
	resp, err := s.http.Get("http://" + s.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, line := range strings.Split(string(must(io.ReadAll(resp.Body))), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}
