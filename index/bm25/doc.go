// Package bm25 is needle's sparse retriever: an inverted index of a corpus JSONL scored as
// pyserini's LuceneSearcher scores it (Search-R1's `--retriever_name bm25`), so that the top-k
// ids and scores are pyserini's for the same corpus and query (docs/retrievers.md).
//
// The parts, by file:
//   - analyze.go, tokenize.go, wordclass_table.go, porter.go, emoji.go: text -> terms,
//     pyserini's default English analyzer (Lucene's StandardTokenizer, possessives, lower case,
//     stop words, Porter);
//   - build.go, row.go, bag.go, runpostings.go, merge.go, blocks.go: Build streams the corpus
//     (rows read as pyserini reads them) into sorted runs in bounded memory, resumable after a
//     kill, and merges them into the folder's files (meta.go names them): a dictionary,
//     doc-ordered postings, per-block score bounds, one length byte per row (norms.go:
//     Lucene's SmallFloat) and the corpus ids;
//   - index.go, cursor.go, search.go, ties.go: Open maps the folder; Search scores a bag of
//     words with Lucene's BM25Similarity by block-max MaxScore, ties broken by id, then
//     Anserini's tie adjustment;
//   - explain.go: Explain takes one row's score for a query apart, term by term (Lucene's
//     explain; `needle bm25 explain`).
//
// An Index is safe for concurrent searches; Build is one process's job per folder.
package bm25
