// Package indexbuild turns a corpus JSONL into a FAISS index folder (`needle build`): passages
// are encoded in shards written atomically so an interrupted build resumes after its last
// finished shard, then the index is built from the shards and written with a manifest (a
// Flat index streamed through faissgo.WriteFlat, others built and written by FAISS).
package indexbuild
