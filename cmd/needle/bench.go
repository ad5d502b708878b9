package main

// benchmarks are the `needle bench <target>` targets; each file adds its own and owns its flags.
var benchmarks = newGroup("needle bench", "target", "", "kernels", "encode", "retrieve", "trace", "docstore", "recall", "search", "index", "weights")

func init() {
	register(command{name: "bench", summary: "benchmarks: kernels, encode, retrieve (and its trace), docstore, recall, search, index", run: benchmarks.run})
}
