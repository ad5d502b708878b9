package doctor

// milvus says what needle holds of Milvus: the client (--milvus URI of build and serve), never
// the server, which neither the developers' build nor the needle_rl wheel ships or starts.
func milvus() Check {
	return Check{Name: "milvus", Status: Info, Value: "client only",
		Why: "--milvus URI needs a Milvus 2.3+ server that you run; none is part of needle or its wheel (docs/milvus.md)"}
}
