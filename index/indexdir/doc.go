// Package indexdir owns the index folder's format, which `needle build` and `needle convert` write
// and `needle serve` reads: the manifest, the embeddings files an index is built from (a
// headerless float32 memmap, a .npy, or a FAISS flat file read in place), and the lock that keeps
// two writers out of one folder. The build job (package indexbuild) and the serving side
// (engine, index/compact, index/flatgpu) both stand on it; neither imports the other.
package indexdir
