// Package milvusindex is needle's only user of Milvus: Index searches a Milvus collection as
// an engine.Index (`needle serve --milvus`), Writer streams vectors into one (`needle build
// --milvus`). Standalone and cluster Milvus speak the same gRPC API, so the URI is all that
// changes between them.
//
// SDK: github.com/milvus-io/milvus-sdk-go/v2 v2.3.6, the SDK line of the Milvus 2.3 servers
// (it pins milvus-proto go-api v2.3.5, the protocol of the 2.3.5 server the tests run). The
// v2.4 SDK speaks the 2.4 protocol and github.com/milvus-io/milvus/client/v2 (v2.6) targets
// 2.5+ servers; neither is what a 2.3 server answers.
//
// A collection built by needle has two fields: "row" (int64 primary key = corpus row, line i
// of the corpus) and "vector" (float vector), and a description recording the corpus row
// count and dimension it was built for.
package milvusindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/milvus-io/milvus-sdk-go/v2/client"
	"github.com/milvus-io/milvus-sdk-go/v2/entity"
)

const (
	rowField    = "row"
	vectorField = "vector"
	// dialTimeout bounds connecting to Milvus at start (the SDK dials blocking).
	dialTimeout = 20 * time.Second
)

// ErrUnavailable is wrapped by the errors of a search or check that Milvus did not answer
// (unreachable, restarting, collection not loaded): the caller may retry later.
var ErrUnavailable error = unavailable("milvus unavailable")

// unavailable is engine's UnavailableError (the server answers 503 + Retry-After).
type unavailable string

func (e unavailable) Error() string     { return string(e) }
func (e unavailable) Unavailable() bool { return true }

// dial connects to the Milvus proxy at uri ("host:port", or http(s)://host:port).
func dial(ctx context.Context, uri string) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := client.NewClient(ctx, client.Config{Address: uri})
	if err != nil {
		return nil, fmt.Errorf("connect to milvus at %s: %w", uri, err)
	}
	return c, nil
}

// description is what needle records in a collection's description: the corpus it was
// built for, so serve and a resumed build can tell another collection from theirs.
type description struct {
	Needle int   `json:"needle"` // format version
	Rows   int64 `json:"rows"`   // corpus rows (the collection is complete at this count)
	Dim    int   `json:"dim"`
}

func (d description) String() string {
	b, _ := json.Marshal(d)
	return string(b)
}

// collectionInfo is a collection's schema as needle uses it.
type collectionInfo struct {
	dim  int
	desc *description // nil: not built by needle
}

// describe checks that coll exists with needle's schema (int64 primary key "row", float
// vector "vector") and returns its dimension and description.
func describe(ctx context.Context, c client.Client, uri, coll string) (collectionInfo, error) {
	ok, err := c.HasCollection(ctx, coll)
	if err != nil {
		return collectionInfo{}, fmt.Errorf("milvus at %s: %w", uri, err)
	}
	if !ok {
		return collectionInfo{}, fmt.Errorf("milvus at %s has no collection %q (a build into it makes it)", uri, coll)
	}
	col, err := c.DescribeCollection(ctx, coll)
	if err != nil {
		return collectionInfo{}, fmt.Errorf("milvus collection %q: %w", coll, err)
	}
	var info collectionInfo
	var pk bool
	for _, f := range col.Schema.Fields {
		switch {
		case f.Name == rowField && f.PrimaryKey && f.DataType == entity.FieldTypeInt64:
			pk = true
		case f.Name == vectorField && f.DataType == entity.FieldTypeFloatVector:
			info.dim, err = strconv.Atoi(f.TypeParams[entity.TypeParamDim])
			if err != nil {
				return collectionInfo{}, fmt.Errorf("milvus collection %q: vector dim %q: %w", coll, f.TypeParams[entity.TypeParamDim], err)
			}
		}
	}
	if !pk || info.dim == 0 {
		return collectionInfo{}, fmt.Errorf("milvus collection %q is not a needle collection: want an int64 primary key %q and a float vector %q", coll, rowField, vectorField)
	}
	var d description
	if json.Unmarshal([]byte(col.Schema.Description), &d) == nil && d.Needle > 0 {
		info.desc = &d
	}
	return info, nil
}

// count returns the rows of coll visible to a strongly consistent query (coll is loaded);
// expr ("" = all) filters them.
func count(ctx context.Context, c client.Client, coll, expr string) (int64, error) {
	res, err := c.Query(ctx, coll, nil, expr, []string{"count(*)"}, client.WithSearchQueryConsistencyLevel(entity.ClStrong))
	if err != nil {
		return 0, err
	}
	col := res.GetColumn("count(*)")
	if col == nil || col.Len() != 1 {
		return 0, errors.New("count(*) query returned no count")
	}
	return col.GetAsInt64(0)
}

// load loads coll into the query nodes (a no-op when it is loaded) and waits until it is.
func load(ctx context.Context, c client.Client, coll string) error {
	state, err := c.GetLoadState(ctx, coll, nil)
	if err != nil {
		return err
	}
	if state == entity.LoadStateLoaded {
		return nil
	}
	return c.LoadCollection(ctx, coll, false)
}
