// CUDA kernels of the GPU flat index (index/flatgpu): the top-k selection that follows each
// cuBLAS GEMM tile, the final sort, and the fp32 -> fp16 conversion of rows while loading.
// Compiled twice from this one source (kernels/common/cudev.h): to sm_80 PTX by
// clang-16 (cmake/native_parts.cmake), which flatscangpu.go embeds and loads through package cuda, and
// as C++ on the CPU by emutest/, which compares it with the scalar C reference (emutest/topk_ref.c).
//
// Every hit is one 64-bit key, so that "best" is a plain integer comparison, better score first
// and the lower label first among equal scores, and no two hits of a query are equal:
//   key = ordered(score) << 32 | (0xffffffff - label)
// where ordered() maps a float to a uint32 in the same order (for L2, in reverse order: smaller
// distances are better). A NaN score is never a hit; key 0 means "no hit" (label -1), and no
// real hit has it (ordered() of a non-NaN float is never 0). Keys are decoded on the host
// (keys.go), which also applies FAISS's own tie rule: lower label first is FAISS's order for
// L2; for inner product FAISS's heap keeps other tied rows, chosen from 2k such candidates.
//
// Selection is a radix select on the keys of one query per block: 8-bit digits from the top,
// a shared-memory histogram per pass finds the digit of the k-th best key, and it stops as
// soon as the bin holding the k-th key holds exactly the keys still needed (usually after two
// or three passes over the tile; when the first pass finds few enough valid keys, the later
// ones read them from shared memory). The keys >= the k-th are then written out in any order; the
// last tile's output is sorted by nl_topk_sort. A tile's selection also takes the previous
// tiles' k best keys (prev), which is how tiles are merged on the device; a tile may be split
// in segments over more blocks (few queries), whose keys nl_topk_merge joins; shards are
// merged on the host from their sorted keys.
#include "kernels/common/cudev.h"

#include <stdint.h>
#pragma clang force_cuda_host_device begin
#include "kernels/common/half.h"  // nl_half_to_float, nl_float_to_half
#pragma clang force_cuda_host_device end

typedef unsigned long long u64;

// nl_topk_order maps a float to a uint32 of the same order (larger float, larger integer);
// smallest reverses it.
__device__ inline uint32_t nl_topk_order(float f, int smallest) {
  uint32_t u = cudev_float_to_bits(f);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return smallest ? ~u : u;
}

// TileSource reads the keys a selection chooses from: n scores of one query (labels base + i;
// for L2 the scores are inner products turned into distances with the row and query norms),
// then the nprev keys of the previous tiles (0 = empty).
struct TileSource {
  const float* scores;
  long long n;
  long long base;
  const float* xnorm;  // null: inner product; else squared L2 norms of the tile's rows
  float qnorm;
  const u64* prev;
  long long nprev;
  u64 floor;  // the k-th best key of the previous tiles (0 when fewer): anything below loses

  __device__ long long size() const { return n + nprev; }
  __device__ u64 key(long long i) const {
    if (i >= n) return prev[i - n];
    float s = scores[i];
    if (xnorm) {
      s = (qnorm + xnorm[i]) - 2.0f * s;  // FAISS's ||q||^2 + ||x||^2 - 2 q.x, clamped at 0
      if (s < 0.0f) s = 0.0f;
    }
    if (s != s) return 0;
    if (s == 0.0f) s = 0.0f;  // -0 ties with +0, as float comparison (FAISS) has it
    u64 key = ((u64)nl_topk_order(s, xnorm != nullptr) << 32) | (u64)(0xffffffffu - (uint32_t)(base + i));
    return key > floor ? key : 0;
  }
};

// kCandCap is how many keys topk_select keeps in shared memory: when the first pass finds at
// most that many (a tile after the floor has risen), the later passes read them there instead
// of reading the scores again.
#define kCandCap 2048

// topk_select writes the k largest keys of src (fewer when it has fewer non-zero keys) to out
// in no particular order and fills out[k..width) with 0. Called by every thread of the block.
template <typename Source>
__device__ inline void topk_select(const Source& src, int k, u64* out, long long width) {
  __shared__ unsigned hist[256];
  __shared__ u64 cand[kCandCap];
  __shared__ u64 s_prefix;
  __shared__ unsigned s_need, s_pos, s_ncand;
  __shared__ int s_done;
  unsigned tid = threadIdx.x, nt = blockDim.x;
  long long size = src.size();
  if (tid == 0) s_prefix = 0, s_need = (unsigned)k, s_done = 0, s_pos = 0, s_ncand = 0;
  for (int pass = 0; pass < 8; pass++) {
    __syncthreads();
    if (s_done) break;
    int shift = 56 - 8 * pass;
    u64 mask = pass == 0 ? 0 : ~0ull << (64 - 8 * pass), prefix = s_prefix;
    for (unsigned b = tid; b < 256; b += nt) hist[b] = 0;
    __syncthreads();
    int shared_keys = pass > 0 && s_ncand <= kCandCap;  // the same for every thread
    long long count = shared_keys ? (long long)s_ncand : size;
    for (long long i = tid; i < count; i += nt) {
      u64 key = shared_keys ? cand[i] : src.key(i);
      if (key != 0 && (key & mask) == prefix) {
        atomicAdd(&hist[(key >> shift) & 255], 1u);
        if (pass == 0) {  // pass 0 sees every valid key: keep them while they fit
          unsigned p = atomicAdd(&s_ncand, 1u);
          if (p < kCandCap) cand[p] = key;
        }
      }
    }
    __syncthreads();
    if (tid == 0) {
      unsigned need = s_need, above = 0;
      int found = 0;
      for (int b = 255; b >= 0; b--) {
        unsigned h = hist[b];
        if (above + h >= need) {
          s_prefix = prefix | ((u64)b << shift);
          s_need = need - above;
          s_done = h == need - above || pass == 7;  // the bin is exactly what is still needed
          found = 1;
          break;
        }
        above += h;
      }
      if (!found) s_prefix = 1, s_done = 1;  // fewer valid keys than k (pass 0): take them all
    }
  }
  __syncthreads();
  u64 kth = s_prefix;  // every key >= kth is selected: exactly min(k, valid keys) of them
  int shared_keys = s_ncand <= kCandCap;
  long long count = shared_keys ? (long long)s_ncand : size;
  for (long long i = tid; i < count; i += nt) {
    u64 key = shared_keys ? cand[i] : src.key(i);
    if (key >= kth) {
      unsigned p = atomicAdd(&s_pos, 1u);
      if (p < (unsigned)k) out[p] = key;
    }
  }
  __syncthreads();
  for (long long j = (long long)(s_pos < (unsigned)k ? s_pos : k) + tid; j < width; j += nt) out[j] = 0;
}

// block_sum_to writes the sum of every thread's v to *dst (when not null), through partial
// (the caller's __shared__ array of 32, one slot per warp). Called by every thread of the block.
__device__ inline void block_sum_to(float v, float* partial, float* dst) {
  if (!dst) return;
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; w++) sum += partial[w];
    *dst = sum;
  }
}

// block_min_key is the smallest of n keys at p (all of u64's range when n is 0), for every
// thread of the block, through scratch (the caller's __shared__ array of 1024).
__device__ inline u64 block_min_key(const u64* p, long long n, u64* scratch) {
  u64 m = ~0ull;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) m = p[i] < m ? p[i] : m;
  scratch[threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned t = 1; t < blockDim.x; t++) m = scratch[t] < m ? scratch[t] : m;
    scratch[0] = m;
  }
  __syncthreads();
  m = scratch[0];
  __syncthreads();
  return m;
}

extern "C" {

// nl_topk_tile: grid (queries, segments), any block of whole warps up to 1024 threads.
// Query q's n scores are scores[q*ld ..]; block (q, s) selects among scores [s*seglen,
// (s+1)*seglen) of them (labels from base) and, for s = 0, its previous tiles' keys
// prev[q*width .. +k] (prev null for the first tile). Its k best keys go to
// out[(q*segments + s)*width ..], zero-filled to width (width >= k); with more than one
// segment, nl_topk_merge then joins them. xnorm (n floats) and qnorm (one per query) select
// L2; both null for inner product. Segments keep the GPU busy when queries are few. Scores
// worse than the previous tiles' k-th key are dropped at once (no histogram atomics): after
// the first tiles, almost all of them.
__global__ void nl_topk_tile(const float* scores, long long ld, long long n, long long seglen,
                             long long base, const float* xnorm, const float* qnorm,
                             const u64* prev, int k, u64* out, long long width) {
  __shared__ u64 scratch[1024];
  long long q = blockIdx.x, seg = blockIdx.y, first = seg * seglen;
  long long len = n - first < seglen ? n - first : seglen;
  if (len < 0) len = 0;
  const u64* p = prev ? prev + q * width : nullptr;
  u64 floor = p ? block_min_key(p, k, scratch) : 0;  // 0 when p holds fewer than k keys
  if (seg != 0) p = nullptr;  // the previous keys join the selection once, in segment 0
  TileSource src = {scores + q * ld + first, len, base + first, xnorm ? xnorm + first : nullptr,
                    xnorm ? qnorm[q] : 0.0f, p, p ? (long long)k : 0, floor};
  topk_select(src, k, out + (q * gridDim.y + seg) * width, width);
}

// KeySource reads count keys (0 = empty) of one query.
struct KeySource {
  const u64* keys;
  long long count;
  __device__ long long size() const { return count; }
  __device__ u64 key(long long i) const { return keys[i]; }
};

// nl_topk_merge: grid (queries), any block of whole warps. Query q's k best keys among
// in[q*count .. +count] (the segments of nl_topk_tile, count = segments*width) go to
// out[q*width ..], zero-filled to width.
__global__ void nl_topk_merge(const u64* in, long long count, int k, u64* out, long long width) {
  long long q = blockIdx.x;
  KeySource src = {in + q * count, count};
  topk_select(src, k, out + q * width, width);
}

// nl_topk_sort: grid (queries), any block of whole warps. Sorts each query's width keys
// (width a power of two) from keys[q*width] in descending order: a bitonic sort in global memory.
__global__ void nl_topk_sort(u64* keys, long long width) {
  u64* row = keys + (long long)blockIdx.x * width;
  for (long long size = 2; size <= width; size <<= 1) {
    for (long long stride = size / 2; stride > 0; stride >>= 1) {
      for (long long i = threadIdx.x; i < width / 2; i += blockDim.x) {
        long long lo = 2 * stride * (i / stride) + i % stride, hi = lo + stride;
        int descending = (lo & size) == 0;
        u64 a = row[lo], b = row[hi];
        if ((a < b) == descending) row[lo] = b, row[hi] = a;
      }
      __syncthreads();
    }
  }
}

// nl_rows_prepare: grid (rows), any block of whole warps. Row r of src (dim fp32 values) is
// written as fp16 to dst16 (when not null; the device matrix of an fp16 index) and its squared
// norm, of the values as stored, to norms[r] (when not null; L2 indexes).
__global__ void nl_rows_prepare(const float* src, long long dim, uint16_t* dst16, float* norms) {
  __shared__ float partial[32];
  long long r = blockIdx.x;
  float acc = 0.0f;
  for (long long j = threadIdx.x; j < dim; j += blockDim.x) {
    float v = src[r * dim + j];
    if (dst16) {
      uint16_t h = nl_float_to_half(v);
      dst16[r * dim + j] = h;
      v = nl_half_to_float(h);
    }
    acc += v * v;
  }
  block_sum_to(acc, partial, norms ? norms + r : nullptr);
}

// nl_rows_random: grid (rows), any block of whole warps. Fills rows row0.. of a synthetic
// index (the benchmarks' vectors, made on the device) with seeded uniform values in [-1, 1),
// value i of the matrix being a function of (seed, i) only: to dst16 as fp16 or to dst32, and
// the squared norms of the values as stored to norms (when not null).
__global__ void nl_rows_random(u64 seed, long long row0, long long dim, uint16_t* dst16,
                               float* dst32, float* norms) {
  __shared__ float partial[32];
  long long r = blockIdx.x;
  float acc = 0.0f;
  for (long long j = threadIdx.x; j < dim; j += blockDim.x) {
    u64 z = seed + (u64)((row0 + r) * dim + j) * 0x9e3779b97f4a7c15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float v = (float)(z >> 40) * 0x1p-23f - 1.0f;
    if (dst16) {
      uint16_t h = nl_float_to_half(v);
      dst16[r * dim + j] = h;
      v = nl_half_to_float(h);
    } else {
      dst32[r * dim + j] = v;
    }
    acc += v * v;
  }
  block_sum_to(acc, partial, norms ? norms + r : nullptr);
}

// nl_read: grid-stride reads of n 8-byte words, the device's read bandwidth yardstick. The
// words are folded so the loads cannot be dropped; out[0] is written only on an impossible fold.
__global__ void nl_read(const u64* p, long long n, u64* out) {
  u64 acc = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    acc ^= p[i];
  }
  if (acc == 0x5bd1e9955bd1e995ull) out[0] = acc;
}

}  // extern "C"
