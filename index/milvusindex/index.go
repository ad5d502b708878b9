package milvusindex

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang/protobuf/proto"
	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/milvuspb"
	"github.com/milvus-io/milvus-proto/go-api/v2/schemapb"
	"github.com/milvus-io/milvus-sdk-go/v2/client"
	"github.com/milvus-io/milvus-sdk-go/v2/entity"

	"needle/internal/byteview"
	"needle/internal/option"
)

// Options say which collection `needle serve --milvus` searches, and how.
type Options struct {
	URI        string        // the Milvus proxy, host:port or http(s)://host:port
	Collection string        // built by `needle build --milvus`
	Ef         int           // HNSW search list size (raised to k when smaller); 0 = 128
	Nprobe     int           // IVF lists probed per query; 0 = 32
	Timeout    time.Duration // one search or check; 0 = 10s (past it the request gets a 503)
}

// Specs declares the options (`needle serve --milvus`'s flags).
func (o *Options) Specs() option.Specs {
	return option.Specs{
		option.String(&o.URI, "URI", "milvus", "", "search a Milvus collection (standalone or cluster: same API) at this URI, host:port or http(s)://host:port,\n"+
			"instead of a FAISS index; needs --collection"),
		option.String(&o.Collection, "Collection", "collection", "", "with --milvus: the collection, built by needle build --milvus"),
		option.Num(&o.Ef, "Ef", "milvus-ef", 0, option.From(0), "with --milvus: HNSW search list size, raised to topk when smaller (0 = 128)"),
		option.Num(&o.Nprobe, "Nprobe", "milvus-nprobe", 0, option.From(0), "with --milvus: IVF lists probed per query (0 = 32)"),
		option.Num(&o.Timeout, "Timeout", "milvus-timeout", 0, option.From(0), "with --milvus: most time one search may take (0 = 10s); past it, or with Milvus down,\n"+
			"/retrieve answers 503 + Retry-After and /ready is false until Milvus answers again"),
	}
}

// Index searches a Milvus collection: one Search RPC per batch of queries. Safe for
// concurrent use (the gRPC connection is).
type Index struct {
	c      client.Client
	svc    milvuspb.MilvusServiceClient // the SDK's stub: Search is called on it directly
	opt    Options
	dim    int
	ntotal int64
	metric string // "IP" or "L2", from the collection's index
	kind   string // index type ("HNSW", "IVF_FLAT", ...)
}

// Open connects to opt.URI and checks that opt.Collection is a needle collection with a
// vector index, loads it if it is not loaded, and counts its rows. The caller checks
// dimension and row count against the encoder and corpus (engine.NewRetriever).
func Open(opt Options) (*Index, error) {
	if err := opt.Specs().Check(); err != nil {
		return nil, err
	}
	opt.Ef = cmp.Or(opt.Ef, 128)
	opt.Nprobe = cmp.Or(opt.Nprobe, 32)
	opt.Timeout = cmp.Or(opt.Timeout, 10*time.Second)
	ctx := context.Background()
	c, err := dial(ctx, opt.URI)
	if err != nil {
		return nil, err
	}
	x, err := open(ctx, c, opt)
	if err != nil {
		c.Close()
		return nil, err
	}
	return x, nil
}

func open(ctx context.Context, c client.Client, opt Options) (*Index, error) {
	info, err := describe(ctx, c, opt.URI, opt.Collection)
	if err != nil {
		return nil, err
	}
	idx, err := c.DescribeIndex(ctx, opt.Collection, vectorField)
	if err != nil || len(idx) == 0 {
		return nil, fmt.Errorf("milvus collection %q has no vector index (a finished build creates one): %v", opt.Collection, err)
	}
	params := idx[0].Params()
	x := &Index{c: c, svc: c.(*client.GrpcClient).Service, opt: opt, dim: info.dim,
		metric: params["metric_type"], kind: string(idx[0].IndexType())}
	if x.metric != string(entity.IP) && x.metric != string(entity.L2) {
		return nil, fmt.Errorf("milvus collection %q: metric %q, want IP or L2", opt.Collection, x.metric)
	}
	if err := load(ctx, c, opt.Collection); err != nil {
		return nil, fmt.Errorf("load milvus collection %q: %w", opt.Collection, err)
	}
	if x.ntotal, err = count(ctx, c, opt.Collection, ""); err != nil {
		return nil, fmt.Errorf("count milvus collection %q: %w", opt.Collection, err)
	}
	if info.desc != nil && info.desc.Rows != x.ntotal {
		return nil, fmt.Errorf("milvus collection %q holds %d of the %d rows it was built for: an unfinished build (run the build again to resume it)",
			opt.Collection, x.ntotal, info.desc.Rows)
	}
	return x, nil
}

func (x *Index) Dim() int      { return x.dim }
func (x *Index) Ntotal() int64 { return x.ntotal }

// Describe names the backend for logs: index type and metric.
func (x *Index) Describe() string {
	return fmt.Sprintf("milvus %s collection %q (%s, %s)", x.opt.URI, x.opt.Collection, x.kind, x.metric)
}

// Search sends the len(q)/Dim() query vectors in one Search RPC and writes the k best rows
// and scores of each into dist and labels (label -1 past the hits Milvus returned). Scores
// are Milvus's: inner products for IP (best first, as FAISS), squared L2 distances for L2.
// An error that is Milvus's (unreachable, not loaded, timed out) wraps ErrUnavailable.
func (x *Index) Search(q []float32, k int, dist []float32, labels []int64) error {
	return x.search(context.Background(), q, k, dist, labels)
}

func (x *Index) search(ctx context.Context, q []float32, k int, dist []float32, labels []int64) error {
	n := len(q) / x.dim
	raw := byteview.Float32s(q) // read while the request is built
	values := make([][]byte, n)
	for i := range values {
		values[i] = raw[4*i*x.dim : 4*(i+1)*x.dim]
	}
	group, err := proto.Marshal(&commonpb.PlaceholderGroup{Placeholders: []*commonpb.PlaceholderValue{
		{Tag: "$0", Type: commonpb.PlaceholderType_FloatVector, Values: values}}})
	if err != nil {
		return err
	}
	req := &milvuspb.SearchRequest{
		CollectionName:   x.opt.Collection,
		DslType:          commonpb.DslType_BoolExprV1,
		PlaceholderGroup: group,
		SearchParams: entity.MapKvPairs(map[string]string{
			"anns_field": vectorField, "topk": strconv.Itoa(k), "metric_type": x.metric,
			"params": x.searchParams(k), "round_decimal": "-1",
		}),
		GuaranteeTimestamp: client.BoundedTimestamp,
		Nq:                 int64(n),
	}
	ctx, cancel := context.WithTimeout(ctx, x.opt.Timeout)
	defer cancel()
	resp, err := x.svc.Search(ctx, req)
	if err == nil {
		err = statusError(resp.GetStatus())
	}
	if err != nil {
		return fmt.Errorf("%w: search %q at %s: %v", ErrUnavailable, x.opt.Collection, x.opt.URI, err)
	}
	return fillResults(resp.GetResults(), n, k, dist, labels)
}

// searchParams is the "params" JSON of a search with k results on this index type.
func (x *Index) searchParams(k int) string {
	p := map[string]int{}
	switch x.kind {
	case string(entity.HNSW):
		p["ef"] = max(x.opt.Ef, k)
	case string(entity.IvfFlat), string(entity.IvfSQ8), string(entity.IvfPQ):
		p["nprobe"] = x.opt.Nprobe
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// fillResults copies Milvus's per-query hits (res.Topks[i] of them, concatenated) into the
// caller's n*k buffers.
func fillResults(res *schemapb.SearchResultData, n, k int, dist []float32, labels []int64) error {
	topks, ids, scores := res.GetTopks(), res.GetIds().GetIntId().GetData(), res.GetScores()
	if len(topks) != n || len(ids) != len(scores) {
		return fmt.Errorf("milvus search returned %d result lists for %d queries", len(topks), n)
	}
	off := 0
	for i := range n {
		rc := int(topks[i])
		if rc > k || off+rc > len(ids) {
			return fmt.Errorf("milvus search returned %d hits for query %d of top %d", rc, i, k)
		}
		copy(labels[i*k:], ids[off:off+rc])
		copy(dist[i*k:], scores[off:off+rc])
		for j := i*k + rc; j < (i+1)*k; j++ {
			labels[j], dist[j] = -1, 0
		}
		off += rc
	}
	return nil
}

// Check reports whether the collection answers a search now (serve's /ready): an error
// wrapping ErrUnavailable when not. It searches for real (one query, top 1): after a
// Milvus restart the load state says loaded before the query nodes serve the segments.
func (x *Index) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // /ready answers quickly either way
	defer cancel()
	probe := make([]float32, x.dim)
	probe[0] = 1
	return x.search(ctx, probe, 1, make([]float32, 1), make([]int64, 1))
}

// Close closes the connection.
func (x *Index) Close() { x.c.Close() }

// statusError is the error a Milvus reply's status carries, nil for success.
func statusError(st *commonpb.Status) error {
	if st == nil {
		return errors.New("no status in reply")
	}
	if st.GetErrorCode() != commonpb.ErrorCode_Success {
		return fmt.Errorf("%s: %s", st.GetErrorCode(), st.GetReason())
	}
	return nil
}
