package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"needle/encoder/rerank"
	"needle/engine"
)

// The reranker's endpoints, served when needle serve has --rerank-model: /retrieve takes
// Search-R1's retrieval_rerank_server.py request and /rerank its rerank_server.py one.

// Search-R1's defaults (retrieval_rerank_server.py's SearchRequest, rerank_server.py's
// RerankerArguments).
const (
	defaultTopKRetrieval = 10
	defaultTopKRerank    = 3
)

// rerankRetrieveRequest is POST /retrieve with a reranker, after validation. TopKRerank -1
// keeps every reranked document (a null topk_rerank: Python's [:None]).
type rerankRetrieveRequest struct {
	Queries                   []string
	TopKRetrieval, TopKRerank int
	ReturnScores              bool
}

// parseRerankRetrieve validates {queries: List[str], topk_retrieval: Optional[int] = 10,
// topk_rerank: Optional[int] = 3, return_scores: bool = False}. A null topk_retrieval is the
// server's --topk (the retriever's default in the anchor).
func parseRerankRetrieve(contentType, body []byte, maxQueries, defaultTopK int) (rerankRetrieveRequest, error) {
	r := rerankRetrieveRequest{TopKRetrieval: defaultTopKRetrieval, TopKRerank: defaultTopKRerank}
	obj, err := decodeObject(contentType, body)
	if err != nil {
		return r, err
	}
	var details []detail
	keep := func(err error) {
		if v, ok := err.(*validationError); ok {
			details = append(details, v.details...)
		}
	}
	r.Queries, err = stringList(obj, body, "queries", maxQueries)
	keep(err)
	for _, f := range []struct {
		name       string
		dst        *int
		null, zero int
	}{{"topk_retrieval", &r.TopKRetrieval, defaultTopK, defaultTopK}, {"topk_rerank", &r.TopKRerank, -1, 0}} {
		raw, ok := obj[f.name]
		switch {
		case !ok:
		case string(raw) == "null":
			*f.dst = f.null
		default:
			n, err := laxInt(raw, f.name)
			if err == nil && n < 0 {
				err = invalid("greater_than_equal", "Input should be greater than or equal to 0", raw, map[string]any{"ge": 0}, f.name)
			}
			keep(err)
			if *f.dst = n; n == 0 {
				*f.dst = f.zero
			}
		}
	}
	if raw, ok := obj["return_scores"]; ok {
		r.ReturnScores, err = laxBool(raw, "return_scores")
		keep(err)
	}
	if details != nil {
		return rerankRetrieveRequest{}, &validationError{details}
	}
	return r, nil
}

// rerankRequest is POST /rerank after validation: each query's passages in the reranker's
// string form, and how many to keep (0: defaultTopKRerank, as the anchor's `if not
// rerank_topk`).
type rerankRequest struct {
	Queries      []string
	Passages     [][]string
	TopK         int
	ReturnScores bool
}

// parseRerank validates {queries: List[str], documents: List[List[dict]], rerank_topk:
// Optional[int] = None, return_scores: bool = False}; a document is a retrieval hit, either
// {"document": {"contents": ...}, ...} or {"contents": ...}.
func parseRerank(contentType, body []byte, maxQueries int) (rerankRequest, error) {
	var r rerankRequest
	obj, err := decodeObject(contentType, body)
	if err != nil {
		return r, err
	}
	if r.Queries, err = stringList(obj, body, "queries", maxQueries); err != nil {
		return r, err
	}
	raw, ok := obj["documents"]
	if !ok {
		return r, invalid("missing", "Field required", body, nil, "documents")
	}
	var docs [][]struct {
		Contents *string `json:"contents"`
		Document *struct {
			Contents *string `json:"contents"`
		} `json:"document"`
	}
	if err := json.Unmarshal(raw, &docs); err != nil {
		return r, invalid("list_type", "Input should be a valid list of lists of documents", raw, nil, "documents")
	}
	if len(docs) != len(r.Queries) {
		return r, invalid("value_error", fmt.Sprintf("Value error, %d queries but %d document lists", len(r.Queries), len(docs)), nil, nil, "documents")
	}
	for q, list := range docs {
		ps := make([]string, len(list))
		for i, d := range list {
			c := d.Contents
			if d.Document != nil {
				c = d.Document.Contents
			}
			if c == nil {
				return r, invalid("missing", "Field required: a document needs contents (or document.contents)", nil, nil, "documents", q, i)
			}
			ps[i] = rerank.PassageString(*c)
		}
		r.Passages = append(r.Passages, ps)
	}
	if raw, ok := obj["rerank_topk"]; ok && string(raw) != "null" {
		if r.TopK, err = laxInt(raw, "rerank_topk"); err != nil {
			return r, err
		}
	}
	if r.TopK <= 0 {
		r.TopK = defaultTopKRerank
	}
	if raw, ok := obj["return_scores"]; ok {
		if r.ReturnScores, err = laxBool(raw, "return_scores"); err != nil {
			return r, err
		}
	}
	return r, nil
}

// retrieveRerank answers POST /retrieve with a reranker: retrieve topk_retrieval rows per
// query, rerank them against their query, keep topk_rerank; documents are strings in
// convert_title_format's form, {"document", "score"} with return_scores. Unlike the anchor,
// each query is paired with its own documents only (retrieval_rerank_server.py pairs every
// query with every query's documents).
func (s *Server) retrieveRerank(ctx *fasthttp.RequestCtx, r *engine.Retriever) {
	req, err := parseRerankRetrieve(ctx.Request.Header.ContentType(), ctx.PostBody(), s.cfg.MaxQueries, s.cfg.DefaultTopK)
	if err != nil {
		writeValidation(ctx, err)
		return
	}
	k := int(min(int64(req.TopKRetrieval), int64(s.cfg.MaxTopK), r.Ntotal()))
	if len(req.Queries)*k > s.cfg.MaxHits {
		writeValidation(ctx, invalid("value_error", fmt.Sprintf("Value error, %d queries x topk_retrieval %d exceeds this server's limit of %d hits per request",
			len(req.Queries), k, s.cfg.MaxHits), nil, nil, "topk_retrieval"))
		return
	}
	watched, stop := s.watchDisconnect(ctx)
	defer stop()
	hits, err := r.Retrieve(watched, req.Queries, k)
	var passages [][]string
	if err == nil {
		err = engine.CatchFault(func() { passages = hitPassages(hits) })
	}
	var ranked [][]engine.Ranked
	if err == nil {
		ranked, err = r.Rerank(watched, req.Queries, passages)
	}
	if s.rerankFailed(ctx, watched, err) {
		return
	}
	s.writeReranked(ctx, passages, ranked, req.TopKRerank, req.ReturnScores, rerank.ConvertTitleFormat)
	s.metrics.queries.Add(uint64(len(req.Queries)))
}

// hitPassages are the hits' contents in the reranker's string form.
func hitPassages(hits [][]engine.Hit) [][]string {
	out := make([][]string, len(hits))
	for q, list := range hits {
		for _, h := range list {
			var row struct{ Contents string }
			_ = json.Unmarshal(h.Row, &row) // Retrieve returns rows with a string contents only
			out[q] = append(out[q], rerank.PassageString(row.Contents))
		}
	}
	return out
}

// rerank answers POST /rerank (rerank_server.py): each query's documents reranked, the best
// rerank_topk kept, as the reranker's "(Title: ...) text" strings.
func (s *Server) rerank(ctx *fasthttp.RequestCtx, r *engine.Retriever) {
	req, err := parseRerank(ctx.Request.Header.ContentType(), ctx.PostBody(), s.cfg.MaxQueries)
	if err != nil {
		writeValidation(ctx, err)
		return
	}
	pairs := 0
	for _, ps := range req.Passages {
		pairs += len(ps)
	}
	if pairs > s.cfg.MaxHits {
		writeValidation(ctx, invalid("value_error", fmt.Sprintf("Value error, %d documents exceed this server's limit of %d per request", pairs, s.cfg.MaxHits), nil, nil, "documents"))
		return
	}
	watched, stop := s.watchDisconnect(ctx)
	defer stop()
	ranked, err := r.Rerank(watched, req.Queries, req.Passages)
	if s.rerankFailed(ctx, watched, err) {
		return
	}
	s.writeReranked(ctx, req.Passages, ranked, req.TopK, req.ReturnScores, func(p string) string { return p })
}

// rerankFailed answers a failed retrieve or rerank and reports whether it did.
func (s *Server) rerankFailed(ctx *fasthttp.RequestCtx, watched context.Context, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(context.Cause(watched), errClientGone):
		ctx.SetConnectionClose()
		writeDetail(ctx, statusClientClosed, errClientGone.Error())
	case errors.Is(err, engine.ErrBusy):
		ctx.Response.Header.Set("Retry-After", "1")
		writeDetail(ctx, fasthttp.StatusServiceUnavailable, err.Error())
	default:
		writeDetail(ctx, fasthttp.StatusInternalServerError, err.Error())
	}
	return true
}

// writeReranked writes {"result": [...]}: per query its best topk (all for -1) documents,
// each form(passage), with {"document", "score"} when scores are asked for.
func (s *Server) writeReranked(ctx *fasthttp.RequestCtx, passages [][]string, ranked [][]engine.Ranked, topk int, scores bool, form func(string) string) {
	result := make([][]any, len(ranked))
	for q, list := range ranked {
		if topk >= 0 && len(list) > topk {
			list = list[:topk]
		}
		result[q] = make([]any, 0, len(list))
		for _, rk := range list {
			doc := form(passages[q][rk.Index])
			if scores {
				result[q] = append(result[q], map[string]any{"document": doc, "score": float64(rk.Score)})
			} else {
				result[q] = append(result[q], doc)
			}
		}
	}
	body, err := marshalJSON(map[string]any{"result": result})
	if err != nil {
		writeDetail(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}
