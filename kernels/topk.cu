// cusoftmax/kernels/topk.cu -- fused softmax + top-k (cusoftmax.softmax_topk).
//
// The k most probable entries of softmax(x) are the k largest logits, so the
// kernels rank the logits and compute the row's online normaliser (m, d) in
// the same single read (Milakov & Gimelshein 2018, Algorithm 4); only the k
// selected values are finished as e^(x - m) / d (or x - m - log d).
//
// Kernels (the dispatcher in cusoftmax/_dispatch.py, section "top-k", picks):
//   topk_stream     one row per block (grid.x == 1), or a slice of a row per
//                   block (grid.x == splits > 1) writing partials. Streams the
//                   row once with UNROLL 16-byte packs in flight per thread.
//                   MODE = TOPK_ONLINE (Algorithm 4: (m, d) and top-k in one
//                   read), TOPK_SAFE (the paper's "safe fused": max first, then
//                   d and top-k in a second read), TOPK_SELECT (top-k only, no
//                   values: the selection half of the unfused path).
//   topk_radix      topk_stream's block-list form (KP >= 128) for float
//                   compute: every candidate >= a lower bound of the k-th
//                   best is appended (one block scan a batch), and a full
//                   buffer is pruned by radix selection instead of sorted.
//   topk_seg        few long rows, k <= 64, in one launch: blocks stream
//                   segments of a row keeping (m, d) and each segment's best;
//                   the row's last block ranks the segment maxima, re-reads
//                   the k best segments and selects among their elements
//                   not worse than the k-th best maximum (see the kernel).
//   topk_csm        few rows, k <= 64, float compute, in one launch (sm_90): a
//                   cluster of 1-8 blocks per row holds the row in shared
//                   memory (16-byte loads), ranks the row's group maxima for a
//                   bound tau, collects the elements not worse than tau in
//                   block 0 and ranks them there (see the kernel).
//   topk_merge      merges the splits' partials of a row: (m, d) pairs with the
//                   associative operator, top-k lists by bitonic merging.
//   topk_gather     values[r, t] = y[r, idx[r, t]] (unfused / sort paths).
//   topk_sort_keys  the ranking key of every element, for the sort path (k
//                   above the on-chip limit): argsort of it is the answer.
//
// Ranking: a candidate packs (order key of the value, complement of the index)
// into one integer, so "better" is a single unsigned comparison and every key
// is distinct: larger value first, lower index first among equal values, NaN
// below everything (its value key is 0), -0 == +0. The empty slot is key 0,
// below every real candidate. float compute: 32-bit value key + 32-bit index
// in a u64 (rows shorter than 2^32 - 1); double compute: two u64.
//
// Selection. A "group" owns a sorted "top" list of KP = next_pow2(k)
// candidates and INC "incoming" slots in shared memory: a warp (KP <= 64: no
// block barriers while streaming) or the whole block (KP >= 128: one list, so
// the block's k-th best filters and far fewer elements become candidates).
// An element is a candidate only if it is not below tau, a lower bound of the
// row's k-th best (the group's k-th best so far; the largest value of any
// warp's tau is shared through shared memory). In the steady state this is
// one float compare per element and one vote per batch. Candidates are
// appended (ballot + popc, one atomic per warp for block lists); when the
// incoming slots are full the group sorts them (bitonic) and merges them into
// the top list (top[i] = max(top[i], inc[KP-1-i]) is bitonic and holds the
// top KP of both; one bitonic merge sorts it), then raises tau. Warp lists
// start from a pre-threshold: the k-th best of the lanes' best candidates of
// the first batch (k <= 32; the ceil(k/2)-th of the lanes' second best for
// k <= 64). At the end of the row the warps' lists are merged pairwise the
// same way by the whole block.
#include "common.cuh"

enum { TOPK_ONLINE = 0, TOPK_SAFE = 1, TOPK_SELECT = 2 };
// Output storage codes (values dtype), a run-time argument.
enum { TOPK_OUT_F16 = 0, TOPK_OUT_BF16 = 1, TOPK_OUT_F32 = 2, TOPK_OUT_F64 = 3 };

#define TOPK_MAX_THREADS 256
#define TOPK_FULL 0xffffffffu

// Blocks of TOPK_MAX_THREADS per SM the stream kernel is built for, which caps
// its registers: 4 -> 64 per thread (float), 3 -> 80 (16-bit input, float
// compute: the conversions), 2 -> 128 (double), 1 (16-bit input, double).
template <typename T, typename C> struct TopkMinBlocks { enum { value = 4 }; };
template <typename T> struct TopkMinBlocks<T, double> { enum { value = 2 }; };
template <> struct TopkMinBlocks<f16_t, float> { enum { value = 3 }; };
template <> struct TopkMinBlocks<bf16_t, float> { enum { value = 3 }; };
template <> struct TopkMinBlocks<f16_t, double> { enum { value = 1 }; };
template <> struct TopkMinBlocks<bf16_t, double> { enum { value = 1 }; };

// ----------------------------------------------------------------------------
// Candidates.
// ----------------------------------------------------------------------------
struct __align__(16) topk_wide_t {
  u64 hi, lo;  // value key, ~index
};

template <typename C> struct Cand;

template <> struct Cand<float> {
  typedef u64 type;
  typedef unsigned key_t;
  typedef float value_t;
  // Exact ranking key: -0 -> +0, every NaN -> 0 (lowest).
  static CSM_DEVICE unsigned key(float x) {
    unsigned b = __float_as_uint(x);
    if (b == 0x80000000u) b = 0u;
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;
    return b ^ ((unsigned)((int)b >> 31) | 0x80000000u);
  }
  static CSM_DEVICE u64 make(float x, i64 col) {
    return ((u64)key(x) << 32) | (u64)(0xffffffffu - (unsigned)col);
  }
  static CSM_DEVICE u64 empty() { return 0ull; }
  static CSM_DEVICE bool better(u64 a, u64 b) { return a > b; }
  static CSM_DEVICE unsigned hi(u64 c) { return (unsigned)(c >> 32); }
  static CSM_DEVICE i64 index(u64 c) { return (i64)(0xffffffffu - (unsigned)c); }
  static CSM_DEVICE float value(u64 c) {  // inverse of key(); key 0 gives a NaN
    return key_value(hi(c));
  }
  static CSM_DEVICE float key_value(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
  }
  // A float t with (v >= t) for every v whose key is >= thr (thr > 0), under
  // -ftz comparisons: thresholds of zero / subnormal size become -FLT_MIN.
  static CSM_DEVICE float prefilter_value(unsigned thr) {
    const float t = key_value(thr);
    return (__float_as_uint(t) & 0x7f800000u) ? t : -1.17549435e-38f;
  }
  static CSM_DEVICE u64 ldcg(const u64* p) { return __ldcg(p); }
  static CSM_DEVICE bool same(u64 a, u64 b) { return a == b; }  // L2 (written by other blocks)
  static CSM_DEVICE u64 shfl_xor(u64 c, int m) { return __shfl_xor_sync(0xffffffffu, c, m); }
  static CSM_DEVICE u64 shfl(u64 c, int src) { return __shfl_sync(0xffffffffu, c, src); }
};

template <> struct Cand<double> {
  typedef topk_wide_t type;
  typedef u64 key_t;
  typedef double value_t;
  static CSM_DEVICE u64 key(double x) {
    u64 b = (u64)__double_as_longlong(x);
    if (b == 0x8000000000000000ull) b = 0ull;
    if ((b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull) return 0ull;
    return b ^ ((u64)((i64)b >> 63) | 0x8000000000000000ull);
  }
  static CSM_DEVICE topk_wide_t make(double x, i64 col) {
    topk_wide_t c;
    c.hi = key(x);
    c.lo = ~(u64)col;
    return c;
  }
  static CSM_DEVICE topk_wide_t empty() {
    topk_wide_t c;
    c.hi = 0ull;
    c.lo = 0ull;
    return c;
  }
  static CSM_DEVICE bool better(const topk_wide_t& a, const topk_wide_t& b) {
    return a.hi > b.hi || (a.hi == b.hi && a.lo > b.lo);
  }
  static CSM_DEVICE u64 hi(const topk_wide_t& c) { return c.hi; }
  static CSM_DEVICE i64 index(const topk_wide_t& c) { return (i64)~c.lo; }
  static CSM_DEVICE double value(const topk_wide_t& c) { return key_value(c.hi); }
  static CSM_DEVICE double key_value(u64 k) {
    return __longlong_as_double((i64)((k & 0x8000000000000000ull) ? (k ^ 0x8000000000000000ull) : ~k));
  }
  static CSM_DEVICE double prefilter_value(u64 thr) { return key_value(thr); }  // no ftz for double
  static CSM_DEVICE bool same(const topk_wide_t& a, const topk_wide_t& b) {
    return a.hi == b.hi && a.lo == b.lo;
  }
  static CSM_DEVICE topk_wide_t ldcg(const topk_wide_t* p) {
    topk_wide_t r;
    r.hi = __ldcg(&p->hi);
    r.lo = __ldcg(&p->lo);
    return r;
  }
  static CSM_DEVICE topk_wide_t shfl_xor(const topk_wide_t& c, int m) {
    topk_wide_t r;
    r.hi = __shfl_xor_sync(0xffffffffu, c.hi, m);
    r.lo = __shfl_xor_sync(0xffffffffu, c.lo, m);
    return r;
  }
  static CSM_DEVICE topk_wide_t shfl(const topk_wide_t& c, int src) {
    topk_wide_t r;
    r.hi = __shfl_sync(0xffffffffu, c.hi, src);
    r.lo = __shfl_sync(0xffffffffu, c.lo, src);
    return r;
  }
};

// One candidate per lane sorted across the warp, best first (lane 0 holds
// the best): a bitonic sort through shuffles.
template <typename CT>
CSM_DEVICE typename CT::type warp_sort_best_first(typename CT::type c, int lane) {
  typedef typename CT::type K;
#pragma unroll
  for (int size = 2; size <= 32; size <<= 1) {
#pragma unroll
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      const K o = CT::shfl_xor(c, stride);
      // in a best-first block the lower lane of a pair keeps the better one
      const bool keep_better = ((lane & stride) == 0) == ((lane & size) == 0 || size == 32);
      const bool o_better = CT::better(o, c);
      if (keep_better == o_better) c = o;
    }
  }
  return c;
}

// The best of one candidate per lane, on every lane: for float compute (a
// u64 key) two 32-bit warp max reductions on sm_80+ (the value key, then the
// ~index among the lanes holding it), else shuffles.
template <typename CT> CSM_DEVICE typename CT::type warp_best(typename CT::type c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(typename CT::type) == 8) {
    const unsigned hi = (unsigned)(c >> 32);
    const unsigned mh = __reduce_max_sync(TOPK_FULL, hi);
    const unsigned ml = __reduce_max_sync(TOPK_FULL, hi == mh ? (unsigned)c : 0u);
    return ((u64)mh << 32) | ml;
  }
#endif
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const typename CT::type t = CT::shfl_xor(c, o);
    if (CT::better(t, c)) c = t;
  }
  return c;
}

// The largest of one value per lane (no NaN), on every lane: for float
// compute one warp max reduction of the order key on sm_80+, else shuffles.
template <typename CT> CSM_DEVICE typename CT::value_t warp_max_value(typename CT::value_t v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(typename CT::type) == 8) return CT::key_value(__reduce_max_sync(TOPK_FULL, CT::key(v)));
#endif
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = Num<typename CT::value_t>::max(v, shfl_xor(v, o));
  return v;
}

// The k-th best (k <= 32) of one candidate per lane, on every lane.
template <typename CT>
CSM_DEVICE typename CT::type warp_kth_best(typename CT::type c, int k, int lane) {
  return CT::shfl(warp_sort_best_first<CT>(c, lane), k - 1);
}

// ----------------------------------------------------------------------------
// (max, sum) of NV values that also carries a NaN whose group max is -inf
// (md_of_values skips the exponentials then, which would drop it).
// ----------------------------------------------------------------------------
template <typename C, int NV> CSM_DEVICE MD<C> topk_md_of(const C* v) {
  MD<C> r = md_of_values<C, NV>(v);
  if (r.m == Num<C>::neg_inf()) {
    bool nan = false;
#pragma unroll
    for (int i = 0; i < NV; ++i) nan |= (v[i] != v[i]);
    if (nan) r.d = Num<C>::nan();
  }
  return r;
}

// Block reductions for a run-time block size (a multiple of 32, <= 1024);
// `red` holds 32 entries. Both end with a barrier.
template <typename C> CSM_DEVICE MD<C> topk_block_md(MD<C> v, MD<C>* red) {
  v = warp_allreduce_md<C, 32>(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  MD<C> r = (lane < nw) ? red[lane] : md_identity<C>();
  r = warp_allreduce_md<C, 32>(r);
  __syncthreads();
  return r;
}

template <typename C, bool MAX> CSM_DEVICE C topk_block_reduce(C v, C* red) {
  v = MAX ? warp_allreduce_max<C, 32>(v) : warp_allreduce_sum<C, 32>(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  C r = (lane < nw) ? red[lane] : (MAX ? Num<C>::neg_inf() : C(0));
  r = MAX ? warp_allreduce_max<C, 32>(r) : warp_allreduce_sum<C, 32>(r);
  __syncthreads();
  return r;
}

// ----------------------------------------------------------------------------
// Bitonic sorting networks on shared memory, best first, run by a "group":
// one warp (gt = lane, gn = 32, synchronised by __syncwarp) or the whole block
// (gt = threadIdx.x, gn = blockDim.x, __syncthreads): `blk` is uniform.
// Pair t of a stage with distance `stride` is (i, i + stride), i = 2t - t % stride.
// ----------------------------------------------------------------------------
CSM_DEVICE void group_sync(bool blk) {
  if (blk) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

// Sort of s[0, n), n a power of two.
template <typename CT>
CSM_DEVICE void group_bitonic_sort(typename CT::type* s, int n, int gt, int gn, bool blk) {
  typedef typename CT::type K;
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = gt; t < (n >> 1); t += gn) {
        const int i = 2 * t - (t & (stride - 1)), j = i + stride;
        const K a = s[i], b = s[j];
        // blocks of `size` alternate direction; the last one is best-first
        const bool swap = ((i & size) == 0) ? CT::better(b, a) : CT::better(a, b);
        if (swap) {
          s[i] = b;
          s[j] = a;
        }
      }
      group_sync(blk);
    }
  }
}

// Merge of a bitonic sequence s[0, n) into best-first order.
template <typename CT>
CSM_DEVICE void group_bitonic_merge(typename CT::type* s, int n, int gt, int gn, bool blk) {
  typedef typename CT::type K;
  for (int stride = n >> 1; stride > 0; stride >>= 1) {
    for (int t = gt; t < (n >> 1); t += gn) {
      const int i = 2 * t - (t & (stride - 1)), j = i + stride;
      const K a = s[i], b = s[j];
      if (CT::better(b, a)) {
        s[i] = b;
        s[j] = a;
      }
    }
    group_sync(blk);
  }
}

// Fold a group's n_in incoming candidates (top + KP, unsorted) into its
// sorted top list top[0, KP). Starts and ends with a group barrier.
template <typename CT>
CSM_DEVICE void group_compact(typename CT::type* top, int n_in, int KP, int gt, int gn, bool blk) {
  typedef typename CT::type K;
  K* inc = top + KP;
  int n = 1;
  while (n < n_in) n <<= 1;
  group_sync(blk);  // appends of every thread visible
  for (int i = n_in + gt; i < n; i += gn) inc[i] = CT::empty();
  group_sync(blk);
  group_bitonic_sort<CT>(inc, n, gt, gn, blk);
  // top KP of (top U inc): max(top[i], inc[KP-1-i]) is bitonic and holds them
  for (int i = gt; i < KP; i += gn) {
    const int j = KP - 1 - i;
    if (j < n) {
      const K b = inc[j];
      if (CT::better(b, top[i])) top[i] = b;
    }
  }
  group_sync(blk);
  group_bitonic_merge<CT>(top, KP, gt, gn, blk);
  group_sync(blk);
}

// Block-cooperative merge of nlists sorted lists s + w * LS (w < nlists), each
// of KP candidates, into list 0 (its first KP entries: the best KP overall).
// Pairs (w, w + h) are merged for h = 1, 2, 4, ... Barriers between stages.
template <typename CT>
CSM_DEVICE void block_tree_merge(typename CT::type* s, int nlists, int LS, int KP) {
  typedef typename CT::type K;
  const int lkp = 31 - __clz(KP), half = KP >> 1;  // KP = 2^lkp
  for (int h = 1; h < nlists; h <<= 1) {
    const int npairs = (nlists - h + 2 * h - 1) / (2 * h);
    for (int it = threadIdx.x; it < npairs * KP; it += blockDim.x) {
      const int q = it >> lkp, i = it & (KP - 1);
      K* A = s + (2 * h * q) * LS;
      const K b = A[h * LS + KP - 1 - i];  // list w + h, reversed
      if (CT::better(b, A[i])) A[i] = b;
    }
    __syncthreads();
    for (int stride = KP >> 1; stride > 0; stride >>= 1) {
      for (int it = threadIdx.x; it < npairs * half; it += blockDim.x) {
        const int q = it >> (lkp - 1), t = it & (half - 1);
        K* A = s + (2 * h * q) * LS;
        const int i = 2 * t - (t & (stride - 1)), j = i + stride;
        const K a = A[i], b = A[j];
        if (CT::better(b, a)) {
          A[i] = b;
          A[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

// ----------------------------------------------------------------------------
// Output.
// ----------------------------------------------------------------------------
template <typename C> CSM_DEVICE void topk_store(void* vals, i64 pos, C v, i64 code) {
  switch (code) {
    case TOPK_OUT_F16: static_cast<f16_t*>(vals)[pos] = from_compute<f16_t>(v); break;
    case TOPK_OUT_BF16: static_cast<bf16_t*>(vals)[pos] = from_compute<bf16_t>(v); break;
    case TOPK_OUT_F32: static_cast<float*>(vals)[pos] = from_compute<float>(v); break;
    default: static_cast<double*>(vals)[pos] = from_compute<double>(v); break;
  }
}

// Row r's results from the best-first list: indices, and (unless SELECT) the
// (log-)probabilities e^(x - m) / d or (x - m) - log d.
template <typename C, int MODE>
CSM_DEVICE void topk_write(const typename Cand<C>::type* list, MD<C> md, void* vals, i64* idx,
                           i64 r, i64 k, i64 code, i64 log) {
  typedef Cand<C> CT;
  C sc = C(0);
  if (MODE != TOPK_SELECT) sc = log ? Num<C>::log(md.d) : Num<C>::rcp(md.d);
  for (i64 t = threadIdx.x; t < k; t += blockDim.x) {
    const typename CT::type c = list[t];
    idx[r * k + t] = CT::index(c);
    if (MODE != TOPK_SELECT) {
      const C xv = CT::value(c);
      const C y = log ? (xv - md.m) - sc : Num<C>::exp(xv - md.m) * sc;
      topk_store<C>(vals, r * k + t, y, code);
    }
  }
}

// ----------------------------------------------------------------------------
// One batch of a thread: packs base + u * blockDim.x + threadIdx.x (u < UNROLL)
// as compute values, -inf outside this block's columns [.., cend). Returns
// true when every element is inside (no per-element checks were needed).
// ----------------------------------------------------------------------------
template <typename C, typename T, int PACK, int UNROLL>
CSM_DEVICE bool topk_load_batch(const T* row, i64 base, i64 pe, int mis, i64 L, i64 cend, C* v) {
  const i64 p0 = base + threadIdx.x;
  const i64 c_first = p0 * PACK - mis;
  const i64 c_last = (p0 + (i64)(UNROLL - 1) * blockDim.x) * PACK - mis + PACK;  // exclusive
  if (c_first >= 0 && c_last <= cend) {
    Pack<T, PACK> pk[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) pk[u] = load_pack<T, PACK>(row + c_first + (i64)u * blockDim.x * PACK);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int e = 0; e < PACK; ++e) v[u * PACK + e] = to_compute<C>(pk[u].v[e]);
    return true;
  }
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {
    const i64 p = p0 + (i64)u * blockDim.x;
    if (p < pe) {
      load_row_pack<C, T, PACK>(row, p, mis, L, Num<C>::neg_inf(), v + u * PACK);
    } else {
#pragma unroll
      for (int e = 0; e < PACK; ++e) v[u * PACK + e] = Num<C>::neg_inf();
    }
  }
  return false;
}

// ----------------------------------------------------------------------------
// Row pieces shared by topk_stream and topk_radix.
// ----------------------------------------------------------------------------
// TOPK_SAFE's first read of this block's columns: their max over the block.
template <typename C, typename T, int PACK, int UNROLL>
CSM_DEVICE C topk_safe_max(const T* row, i64 pb, i64 pe, i64 step, int mis, i64 L, i64 cend, C* red_c) {
  constexpr int E = UNROLL * PACK;
  C mx = Num<C>::neg_inf();
  for (i64 base = pb; base < pe; base += step) {
    C v[E];
    topk_load_batch<C, T, PACK, UNROLL>(row, base, pe, mis, L, cend, v);
#pragma unroll
    for (int e = 0; e < E; ++e) mx = Num<C>::max(mx, v[e]);
  }
  return topk_block_reduce<C, true>(mx, red_c);
}

// A batch's share of the normaliser: the online (m, d) (TOPK_ONLINE) or the
// sum of e^(x - max) (TOPK_SAFE, the max known); nothing for TOPK_SELECT.
template <typename C, int MODE, int E>
CSM_DEVICE void topk_batch_md(const C* v, MD<C>& md, C& dsum) {
  if (MODE == TOPK_ONLINE) {
    md = md_merge(md, topk_md_of<C, E>(v));
  } else if (MODE == TOPK_SAFE) {
    if (md.m != Num<C>::neg_inf()) {
#pragma unroll
      for (int e = 0; e < E; ++e) dsum += Num<C>::exp(v[e] - md.m);
    }
  }
}

// The end of a row: the block's normaliser, then the results from the
// sorted list (one block a row) or the block's list and (m, d) partial for
// topk_merge (splits > 1). Ends with a barrier (the list may be reused).
template <typename C, int MODE>
CSM_DEVICE void topk_row_out(const typename Cand<C>::type* list, MD<C> md, C dsum, MD<C>* red_md, C* red_c,
                             void* vals, i64* idx, typename Cand<C>::type* wsk, C* wsm, i64 r, i64 s,
                             i64 splits, i64 k, int KP, i64 out_code, i64 log) {
  if (MODE == TOPK_ONLINE) md = topk_block_md<C>(md, red_md);
  if (MODE == TOPK_SAFE) md.d = topk_block_reduce<C, false>(dsum, red_c);
  if (splits == 1) {
    topk_write<C, MODE>(list, md, vals, idx, r, k, out_code, log);
  } else {
    typename Cand<C>::type* dst = wsk + (r * splits + s) * KP;
    for (int i = threadIdx.x; i < KP; i += blockDim.x) dst[i] = list[i];
    if (MODE != TOPK_SELECT && threadIdx.x == 0) {
      wsm[2 * (r * splits + s)] = md.m;
      wsm[2 * (r * splits + s) + 1] = md.d;
    }
  }
  __syncthreads();
}

// ----------------------------------------------------------------------------
// topk_stream: grid (splits, row blocks); block (s, b) streams packs
// [s * pps, (s + 1) * pps) of rows b, b + gridDim.y, ... . Thread t owns packs
// base + u * blockDim.x + t (u < UNROLL) of each batch, so a warp reads 32
// consecutive packs per access and batches advance through the row in index
// order (the prefilter relies on that: an element of the current batch that
// ties with tau's value has a larger index than tau, so it cannot win).
// Shared memory (dynamic): warps x (KP + INC) candidates.
// splits == 1: results to vals/idx ((rows, k), row-major). splits > 1: each
// block writes its KP best candidates to wsk[(r * splits + s) * KP + i] and
// its (m, d) to wsm[2 * (r * splits + s)], for topk_merge.
// ----------------------------------------------------------------------------
template <typename T, typename C, int MODE, int UNROLL>
__global__ void __launch_bounds__(TOPK_MAX_THREADS, TopkMinBlocks<T, C>::value)
topk_stream(const T* __restrict__ x, void* __restrict__ vals, i64* __restrict__ idx,
            typename Cand<C>::type* __restrict__ wsk, C* __restrict__ wsm,
            i64 rows, i64 L, i64 sx, i64 k, i64 kp, i64 inc_slots, i64 block_lists, i64 pps,
            i64 out_code, i64 log) {
  typedef Cand<C> CT;
  typedef typename CT::type K;
  typedef typename CT::key_t KT;
  constexpr int PACK = 16 / sizeof(T);
  constexpr int E = UNROLL * PACK;  // elements per thread per batch (<= 32)
  static_assert(E <= 32, "one mask bit per element of a batch");
  const int KP = (int)kp, INC = (int)inc_slots, LS = KP + INC;  // powers of two, INC >= group size
  extern __shared__ __align__(16) unsigned char topk_smem[];
  __shared__ MD<C> red_md[32];
  __shared__ C red_c[32];
  // Largest value key of any group's tau: every group has k candidates at or
  // above its tau, so an element whose value key is below this cannot win.
  __shared__ KT tau_shared;
  __shared__ int blk_n;  // block lists: candidates in inc[] (== n_in)
  K* lists = reinterpret_cast<K*>(topk_smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  // the group owning a list: a warp, or the whole block (block_lists)
  const bool blk = block_lists != 0;
  const int gt = blk ? (int)threadIdx.x : lane, gn = blk ? (int)blockDim.x : 32;
  K* top = lists + (blk ? 0 : warp) * LS;
  K* inc = top + KP;
  const i64 s = blockIdx.x, splits = gridDim.x;
  const i64 step = (i64)blockDim.x * UNROLL;

  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int i = gt; i < KP; i += gn) top[i] = CT::empty();
    if (threadIdx.x == 0) {
      tau_shared = KT(0);
      blk_n = 0;
    }
    __syncthreads();
    K tau = CT::empty();  // group-uniform: lower bound of the row's k-th best
    K best1 = CT::empty();  // k = 1: this thread's best so far
    C best1_v = Num<C>::nan();  // its value (NaN while it is empty or NaN)
    int n_in = 0;         // group-uniform: candidates in inc[]
    bool fresh = !blk && k <= 64;  // warp lists: pre-threshold pending
    const T* row = x + r * sx;
    const int mis = row_misalignment<T, PACK>(row);
    const i64 np = row_packs<PACK>(L, mis);
    const i64 pb = min(np, s * pps), pe = min(np, pb + pps);
    // this block's columns: [pb * PACK - mis, cend) clipped to [0, L)
    const i64 cend = min(L, pe * PACK - mis);
    const i64 spk = (i64)blockDim.x * PACK;  // column distance of a thread's packs

    MD<C> md = md_identity<C>();
    C dsum = C(0);
    if (MODE == TOPK_SAFE)  // first read: the row max
      md.m = topk_safe_max<C, T, PACK, UNROLL>(row, pb, pe, step, mis, L, cend, red_c);

    for (i64 base = pb; base < pe; base += step) {
      C v[E];
      const bool full = topk_load_batch<C, T, PACK, UNROLL>(row, base, pe, mis, L, cend, v);
      topk_batch_md<C, MODE, E>(v, md, dsum);
      if (kp == 1) {  // k = 1: a running best a thread, no lists (fast in any row order)
        const i64 c0 = (base + threadIdx.x) * PACK - mis;
#pragma unroll
        for (int e = 0; e < E; ++e) {
          // a float test first: only values not below the best (ties, NaN,
          // flushed subnormals included) need the exact key comparison
          if (!(v[e] < best1_v)) {
            const i64 col = c0 + (e / PACK) * spk + (e % PACK);
            if (full || (u64)col < (u64)cend) {
              const K c = CT::make(v[e], col);
              if (CT::better(c, best1)) {
                best1 = c;
                best1_v = v[e];
              }
            }
          }
        }
        continue;
      }
      // prefilter: the smallest value key that may enter is above tau's
      // (strictly: tau's element precedes this batch, so a tie loses on the
      // index) and at least the shared bound. 0: everything may enter.
      const KT tv = CT::hi(tau);
      const KT tsh = *reinterpret_cast<volatile KT*>(&tau_shared);
      const KT thr = (tv == KT(0)) ? tsh : (tv + 1 > tsh ? tv + 1 : tsh);
      const C thr_v = CT::prefilter_value(thr);
      bool any = thr == KT(0);
#pragma unroll
      for (int e = 0; e < E; ++e) any |= v[e] >= thr_v;
      if (!(blk ? __syncthreads_or(any) : __any_sync(TOPK_FULL, any))) continue;

      const i64 c0 = (base + threadIdx.x) * PACK - mis;  // column of v[0]
      // elements of this thread that may enter: the prefilter again (a
      // superset of key >= thr; the exact test is per candidate below), in
      // this block's columns
      unsigned mask = 0u;
      if (thr == KT(0)) {
        mask = (E == 32) ? 0xffffffffu : ((1u << E) - 1u);
      } else {
#pragma unroll
        for (int e = 0; e < E; ++e) mask |= (v[e] >= thr_v ? 1u : 0u) << e;
      }
      if (!full) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const i64 col = c0 + (e / PACK) * spk + (e % PACK);
          if ((u64)col >= (u64)cend) mask &= ~(1u << e);  // outside [0, cend)
        }
      }
      if (fresh) {
        // pre-threshold (warp lists, k <= 64): with each lane's m-th best
        // candidate (m = 1, or 2 for k > 32), the ceil(k/m)-th best of those
        // has at least k candidates of this batch at or above it
        K b1 = CT::empty(), b2 = CT::empty();
#pragma unroll
        for (int e = 0; e < E; ++e) {
          if (mask & (1u << e)) {
            const K c = CT::make(v[e], c0 + (e / PACK) * spk + (e % PACK));
            if (CT::better(c, b1)) {
              b2 = b1;
              b1 = c;
            } else if (CT::better(c, b2)) {
              b2 = c;
            }
          }
        }
        const K t0 = (k <= 32) ? warp_kth_best<CT>(b1, (int)k, lane)
                               : warp_kth_best<CT>(b2, (int)((k + 1) / 2), lane);
        if (CT::better(t0, tau)) tau = t0;
        if (lane == 0 && CT::hi(tau) != KT(0)) atomicMax(&tau_shared, CT::hi(tau));
        fresh = false;
      }
      // one candidate per thread per round, appended group-wide; a candidate
      // enters if it is not worse than tau (tau itself may be one of them)
      while (blk ? __syncthreads_or(mask != 0u) : __any_sync(TOPK_FULL, mask != 0u)) {
        const bool has = mask != 0u;
        const int e = has ? __ffs(mask) - 1 : 0;
        mask &= mask - 1u;
        C xv = v[0];
#pragma unroll
        for (int q = 1; q < E; ++q)
          if (q == e) xv = v[q];
        const K c = CT::make(xv, c0 + (e / PACK) * spk + (e % PACK));
        bool take = has && !CT::better(tau, c) && CT::hi(c) >= tsh;
        int cnt = blk ? __syncthreads_count(take) : __popc(__ballot_sync(TOPK_FULL, take));
        if (cnt == 0) continue;
        if (n_in + cnt > INC) {
          group_compact<CT>(top, n_in, KP, gt, gn, blk);
          n_in = 0;
          if (blk && threadIdx.x == 0) blk_n = 0;
          const K t = top[k - 1];
          if (CT::better(t, tau)) tau = t;
          if (lane == 0 && CT::hi(tau) != KT(0)) atomicMax(&tau_shared, CT::hi(tau));
          take = take && !CT::better(tau, c);
          cnt = blk ? __syncthreads_count(take) : __popc(__ballot_sync(TOPK_FULL, take));
        }
        const unsigned bal = __ballot_sync(TOPK_FULL, take);
        int pos = n_in;
        if (blk && bal != 0u) {  // one atomic per warp on the block's counter
          const int leader = __ffs(bal) - 1;
          int wb = 0;
          if (lane == leader) wb = atomicAdd(&blk_n, __popc(bal));
          pos = __shfl_sync(TOPK_FULL, wb, leader);
        }
        if (take) inc[pos + __popc(bal & lanes_below)] = c;
        n_in += cnt;
      }
    }
    if (n_in > 0) group_compact<CT>(top, n_in, KP, gt, gn, blk);
    if (kp == 1) {  // the warp's best is its list of one (warp lists: KP < 128)
      best1 = warp_best<CT>(best1);
      if (lane == 0) top[0] = best1;
    }
    __syncthreads();
    block_tree_merge<CT>(lists, blk ? 1 : nwarps, LS, KP);

    // list 0 read before the next row overwrites it (the helper's barrier)
    topk_row_out<C, MODE>(lists, md, dsum, red_md, red_c, vals, idx, wsk, wsm, r, s, splits, k, KP,
                          out_code, log);
  }
}

// ----------------------------------------------------------------------------
// topk_radix: topk_stream's block-list form (KP >= TOPK_BLOCK_LIST_KP) for
// float compute, with the same arguments, grid and outputs. The block keeps
// one unsorted candidate buffer buf[0, n) of up to CAP = KP + INC entries
// and a lower bound lb of the row's k-th best candidate (0: none yet).
//   - Each batch appends every element whose candidate is >= lb: a block
//     exclusive scan of the threads' counts gives their slots (one barrier a
//     batch, no per-candidate rounds). INC is at least a batch (B = threads
//     x E elements) more than KP, so a batch always fits.
//   - When fewer than B slots are left, the buffer is pruned by radix
//     selection (topk_radix_prune): 8-bit digits of the 64-bit candidates
//     from the top, a histogram a pass, until the candidates >= (the
//     resolved digits, zeros below) are at least k and at most KP; those
//     are compacted to the front and that edge becomes lb.
//   - At the end of the row the buffer is pruned to at most KP and sorted
//     once (bitonic), giving the same best-first list as topk_stream.
// Every discarded candidate is below lb, which is at most the k-th best of
// candidates already seen, so the row's k best are never discarded.
// ----------------------------------------------------------------------------

// Block-wide exclusive scan of one count per thread (blockDim.x a multiple
// of 32); `wt` holds 32 ints. Callers alternate two `wt` buffers between
// calls, so a warp starting the next scan cannot overwrite totals that
// another warp is still reading. *total: the block's sum.
CSM_DEVICE int topk_block_scan(int v, int* wt, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int t = __shfl_up_sync(TOPK_FULL, incl, o);
    if (lane >= o) incl += t;
  }
  if (lane == 31) wt[warp] = incl;
  __syncthreads();
  int off = 0, tot = 0;
  for (int w = 0; w < nw; ++w) {
    const int t = wt[w];
    off += (w < warp) ? t : 0;
    tot += t;
  }
  *total = tot;
  return off + incl - v;
}

// Prune buf[0, n) (n > KP >= k, block-uniform) to the candidates >= an
// edge with at least k and at most KP of them, moved to the front; returns
// their count and sets *lb to the edge. hist: 256 ints; sel: 4 ints (sel[2..3]
// also take the bits where candidates differ); wt: 2 x 32 ints (scan
// buffers, *ph selects, flipped per use).
//   - Leading bytes every candidate shares are skipped (a block OR of c ^
//     buf[0]): they would give one-bin histograms, the slowest kind.
//   - Histogram atomics are aggregated per warp and digit (__match_any_sync).
//   - The compaction moves TOPK_RADIX_Q candidates a thread per block scan.
#define TOPK_RADIX_Q 4
CSM_DEVICE int topk_radix_prune(u64* buf, int n, int k, int KP, int* hist, int* sel, int* wt,
                                int* ph, u64* lb) {
  const int lane = threadIdx.x & 31;
  // bits where some candidate differs from buf[0]
  if (threadIdx.x == 0) {
    sel[2] = 0;
    sel[3] = 0;
  }
  __syncthreads();  // appends done; sel[2..3] cleared
  const u64 c0 = buf[0];
  u64 diff = 0ull;
  for (int i = threadIdx.x; i < n; i += blockDim.x) diff |= buf[i] ^ c0;
  unsigned dhi = __reduce_or_sync(TOPK_FULL, (unsigned)(diff >> 32));
  unsigned dlo = __reduce_or_sync(TOPK_FULL, (unsigned)diff);
  if (lane == 0) {
    if (dhi) atomicOr(reinterpret_cast<unsigned*>(sel + 3), dhi);
    if (dlo) atomicOr(reinterpret_cast<unsigned*>(sel + 2), dlo);
  }
  __syncthreads();
  diff = ((u64)(unsigned)sel[3] << 32) | (u64)(unsigned)sel[2];
  // the top byte holding a differing bit (keys are distinct: diff != 0)
  const int top_bit = 63 - __clzll((long long)diff);
  const int start = (top_bit / 8) * 8;
  u64 pmask = (start == 56) ? 0ull : (~0ull << (start + 8));
  u64 prefix = c0 & pmask;
  int need = k, above = 0, kept = 0;
  for (int shift = start;; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();  // the previous pass's reads of sel and hist done
    for (int base = 0; base < n; base += blockDim.x) {
      const int i = base + (int)threadIdx.x;
      int dig = -1;
      if (i < n) {
        const u64 c = buf[i];
        if ((c & pmask) == prefix) dig = (int)(c >> shift) & 255;
      }
      const unsigned peers = __match_any_sync(TOPK_FULL, dig);
      if (dig >= 0 && lane == __ffs(peers) - 1) atomicAdd(&hist[dig], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // lane l counts bins 255 - 8l - j (j < 8): from the top digit down
      int cnt[8], s = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        cnt[j] = hist[255 - 8 * lane - j];
        s += cnt[j];
      }
      int incl = s;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int t = __shfl_up_sync(TOPK_FULL, incl, o);
        if (lane >= o) incl += t;
      }
      int a = incl - s;
      if (a < need && need <= incl) {  // the digit holding the need-th best
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (a < need && a + cnt[j] >= need) {
            sel[0] = 255 - 8 * lane - j;
            sel[1] = a;
            sel[2] = cnt[j];
          }
          a += cnt[j];
        }
      }
    }
    __syncthreads();
    const int d = sel[0], a = sel[1], c = sel[2];
    prefix |= (u64)d << shift;
    pmask |= 255ull << shift;
    // above + a + c candidates are >= prefix (zeros below): at least k
    if (above + a + c <= KP || shift == 0) {
      kept = above + a + c;
      break;
    }
    above += a;
    need -= a;
  }
  // in-place compaction (order is free: the buffer is unsorted): a chunk's
  // candidates are all read before its scan's barrier and each lands at a
  // slot below the chunk's end, at or above the slots already written
  const u64 edge = prefix;
  int out = 0;
  for (int base = 0; base < n; base += TOPK_RADIX_Q * (int)blockDim.x) {
    u64 c[TOPK_RADIX_Q];
    int cnt = 0;
#pragma unroll
    for (int j = 0; j < TOPK_RADIX_Q; ++j) {
      const int i = base + j * (int)blockDim.x + (int)threadIdx.x;
      c[j] = (i < n) ? buf[i] : 0ull;
      cnt += (i < n && c[j] >= edge) ? 1 : 0;
    }
    int tot;
    int pos = out + topk_block_scan(cnt, wt + 32 * *ph, &tot);
    *ph ^= 1;
#pragma unroll
    for (int j = 0; j < TOPK_RADIX_Q; ++j) {
      const int i = base + j * (int)blockDim.x + (int)threadIdx.x;
      if (i < n && c[j] >= edge) buf[pos++] = c[j];
    }
    out += tot;
  }
  *lb = edge;
  return kept;  // == out
}

template <typename T, typename C, int MODE, int UNROLL>
__global__ void __launch_bounds__(TOPK_MAX_THREADS, TopkMinBlocks<T, C>::value)
topk_radix(const T* __restrict__ x, void* __restrict__ vals, i64* __restrict__ idx,
           typename Cand<C>::type* __restrict__ wsk, C* __restrict__ wsm,
           i64 rows, i64 L, i64 sx, i64 k, i64 kp, i64 inc_slots, i64 block_lists, i64 pps,
           i64 out_code, i64 log) {
  static_assert(sizeof(C) == 4, "topk_radix ranks 64-bit (float key, index) candidates");
  typedef Cand<C> CT;
  constexpr int PACK = 16 / sizeof(T);
  constexpr int E = UNROLL * PACK;  // elements per thread per batch (<= 32)
  static_assert(E <= 32, "one mask bit per element of a batch");
  // buffer: KP + INC slots, INC >= B (a batch's elements) + some room
  const int KP = (int)kp, CAP = (int)(kp + inc_slots), K = (int)k, B = (int)blockDim.x * E;
  extern __shared__ __align__(16) unsigned char topk_smem[];
  __shared__ MD<C> red_md[32];
  __shared__ C red_c[32];
  __shared__ int hist[256];
  __shared__ int sel[4];
  __shared__ int wt[64];
  u64* buf = reinterpret_cast<u64*>(topk_smem);
  const i64 s = blockIdx.x, splits = gridDim.x;
  const i64 step = (i64)blockDim.x * UNROLL;
  int ph = 0;

  for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
    int n = 0;       // block-uniform: candidates in buf
    u64 lb = 0ull;   // block-uniform: lower bound of the row's k-th best
    const T* row = x + r * sx;
    const int mis = row_misalignment<T, PACK>(row);
    const i64 np = row_packs<PACK>(L, mis);
    const i64 pb = min(np, s * pps), pe = min(np, pb + pps);
    const i64 cend = min(L, pe * PACK - mis);
    const unsigned spk = blockDim.x * PACK;

    MD<C> md = md_identity<C>();
    C dsum = C(0);
    if (MODE == TOPK_SAFE)
      md.m = topk_safe_max<C, T, PACK, UNROLL>(row, pb, pe, step, mis, L, cend, red_c);

    for (i64 base = pb; base < pe; base += step) {
      C v[E];
      const bool full = topk_load_batch<C, T, PACK, UNROLL>(row, base, pe, mis, L, cend, v);
      topk_batch_md<C, MODE, E>(v, md, dsum);
      // column of v[e]: c0 + (e / PACK) * spk + e % PACK, in 32 bits (rows of
      // float compute are shorter than 2^32 - 1: TOPK_MAX_PACKED_ROW)
      const unsigned c0 = (unsigned)((base + threadIdx.x) * PACK - mis);
      // candidates: a float prefilter (a superset), then the exact test
      const unsigned thr = CT::hi(lb);
      unsigned mask = 0u;
      if (thr == 0u) {
        mask = (E == 32) ? 0xffffffffu : ((1u << E) - 1u);
      } else {
        const C thr_v = CT::prefilter_value(thr);
#pragma unroll
        for (int e = 0; e < E; ++e) mask |= (v[e] >= thr_v ? 1u : 0u) << e;
      }
      if (!full) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const i64 col = ((base + threadIdx.x) + (i64)(e / PACK) * blockDim.x) * PACK + (e % PACK) - mis;
          if ((u64)col >= (u64)cend) mask &= ~(1u << e);
        }
      }
      if (lb != 0ull && mask != 0u) {
#pragma unroll
        for (int e = 0; e < E; ++e)
          if ((mask & (1u << e)) && CT::make(v[e], c0 + (e / PACK) * spk + (e % PACK)) < lb)
            mask &= ~(1u << e);
      }
      int tot;
      int pos = n + topk_block_scan(__popc(mask), wt + 32 * ph, &tot);
      ph ^= 1;
      if (tot == 0) continue;
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (mask & (1u << e)) buf[pos++] = CT::make(v[e], c0 + (e / PACK) * spk + (e % PACK));
      n += tot;
      // room for the next batch (INC >= B): else prune, to at most KP
      if (n > CAP - B) n = topk_radix_prune(buf, n, K, KP, hist, sel, wt, &ph, &lb);
    }
    if (n > KP) n = topk_radix_prune(buf, n, K, KP, hist, sel, wt, &ph, &lb);
    __syncthreads();  // appends and compaction done
    for (int i = n + (int)threadIdx.x; i < KP; i += blockDim.x) buf[i] = CT::empty();
    __syncthreads();
    group_bitonic_sort<CT>(buf, KP, (int)threadIdx.x, (int)blockDim.x, true);

    // buf read before the next row overwrites it (the helper's barrier)
    topk_row_out<C, MODE>(buf, md, dsum, red_md, red_c, vals, idx, wsk, wsm, r, s, splits, k, KP,
                          out_code, log);
  }
}

// Block j's (m, d) partial of row r (wsm holds them as (m, d) pairs, S a row).
template <typename C> CSM_DEVICE MD<C> seg_partial(const C* wsm, i64 r, i64 S, i64 j) {
  MD<C> o;
  o.m = __ldcg(wsm + 2 * (r * S + j));
  o.d = __ldcg(wsm + 2 * (r * S + j) + 1);
  return o;
}

// This thread's share of the (m, d) merge of a row's S block partials.
template <typename C> CSM_DEVICE MD<C> seg_partials_md(const C* wsm, i64 r, i64 S) {
  MD<C> md = md_identity<C>();
  for (i64 j = threadIdx.x; j < S; j += blockDim.x) md = md_merge(md, seg_partial<C>(wsm, r, S, j));
  return md;
}

// topk_seg's stream, one batch of a lane (E values v, `mask` the ones in the
// row; packs base + u * 32 + lane): the lane's two largest values v1 >= v2
// (NaN skipped) and its best candidate (its value bv when not NaN / empty).
template <typename CT, int E, int PACK>
CSM_DEVICE void seg_batch_best(const typename CT::value_t* v, unsigned mask, i64 base, int lane, int mis,
                               typename CT::type& best, typename CT::value_t& bv, typename CT::value_t& v1,
                               typename CT::value_t& v2) {
  typedef typename CT::value_t C;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    v2 = Num<C>::max(v2, Num<C>::min(v1, v[e]));
    v1 = Num<C>::max(v1, v[e]);
  }
  if (v1 > bv) {  // a better value in this batch (finite or +inf: in the row)
    int ef = E - 1;
#pragma unroll
    for (int e = E - 1; e >= 0; --e)
      if (v[e] == v1) ef = e;
    best = CT::make(v1, (base + (ef / PACK) * 32 + lane) * PACK - mis + (ef % PACK));
    bv = v1;
  } else if (CT::hi(best) == 0 && mask != 0u) {  // nothing yet, or a NaN: full keys
#pragma unroll
    for (int e = 0; e < E; ++e) {
      if (mask & (1u << e)) {
        const typename CT::type c = CT::make(v[e], (base + (e / PACK) * 32 + lane) * PACK - mis + (e % PACK));
        if (CT::better(c, best)) best = c;
      }
    }
    if (CT::hi(best) != 0) bv = CT::value(best);
  }
}

// The end of a segment (the whole warp): its best candidate to *wk and to *wv
// `second`, an upper bound of every other element's value (the best lane's
// second largest, the other lanes' largest). TWO: also the best candidate of
// the other lanes to wk[second_at], and `second` then bounds every element but
// those two (the two lanes' second largest, the other lanes' largest).
template <typename CT, bool TWO>
CSM_DEVICE void seg_end(typename CT::type best, typename CT::value_t v1, typename CT::value_t v2, int lane,
                        typename CT::type* wk, i64 second_at, typename CT::value_t* wv) {
  typedef typename CT::type K;
  typedef typename CT::value_t C;
  const K wb = warp_best<CT>(best);
  const bool is1 = CT::same(wb, best);
  C sec;
  if constexpr (TWO) {
    const K wb2 = warp_best<CT>(is1 ? CT::empty() : best);
    // (lanes without elements hold the empty key and v1 = v2 = -inf)
    sec = warp_max_value<CT>((is1 || CT::same(wb2, best)) ? v2 : v1);
    if (lane == 0) wk[second_at] = wb2;
  } else {
    sec = warp_max_value<CT>(is1 ? v2 : v1);
  }
  if (lane == 0) {
    *wk = wb;
    *wv = sec;
  }
}

// ----------------------------------------------------------------------------
// topk_seg: few long rows, k <= TOPK_SEG_KP_MAX, in one launch.
//
// Row r is cut into W <= TOPK_SEG_WMAX segments of `sp` packs (a multiple of
// 32). Grid (S, rows): block s of row r streams segments [s * spb, (s + 1) *
// spb), one warp per segment at a time, keeping its lanes' online (m, d) and
// best candidate (value key, ~index) and two largest values. At the end of a
// segment the warp stores the segment's best candidate and `second`: an
// upper bound of every other element's value (the best lane's second largest
// value, the other lanes' largest). TWO: also the best candidate of the other
// lanes, and `second` then bounds every element but those two (the two
// lanes' second largest values, the other lanes' largest). They go to
// wsk[r * WMAX + j], wsk[(rows + r) * WMAX + j] (TWO) and wsv[r * WMAX + j],
// the block's (m, d) to wsm[2 * (r * S + s)]. The last block of the row to
// finish (a counter per row in `cnt`, left at zero for the next launch):
//   1. merges the S (m, d) partials;
//   2. ranks the W segment maxima (each warp sorts 32 of them through
//      shuffles; a rank is the position in its own chunk plus a binary search
//      in each other chunk; PICK, small k: each warp takes its chunk's k best
//      by k warp argmaxes, then warp 0 the row's k best of those, one argmax
//      a rank: a maximum among the row's k best is among its chunk's k
//      best; TWO: a thread a maximum counts the better ones among all W,
//      seg_count_better). The segments whose best is among the k best are
//      "selected", and tau = the k-th best segment maximum (when W > k). The
//      k selected maxima are k distinct elements not worse than tau, so the
//      row's k-th best is not worse than tau, and each of the row's top k
//      lies in a selected segment (whose maximum is at least as good): the
//      top k are among the selected segments' elements not worse than tau;
//   3. collects those: a selected segment whose `second` is below tau's value
//      gives its stored candidates (TWO: the second if not worse than tau);
//      the others are re-read (from L2, just streamed);
//   4. up to TOPK_SEG_RANK_MAX candidates: each one's rank among them is its
//      output position (no sort). Up to TOPK_SEG_INC: one bitonic compaction
//      into a sorted list. More (rows of ties, sorted rows): the collection
//      is redone over every selected segment one element per thread per
//      round, compacting whenever the slots could overflow and raising tau
//      each time (correct, slower).
// Typical rows give about k candidates and re-read a segment only where two
// of its elements (TWO: three, or two in one lane) are not worse than tau:
// TWO is the dispatcher's choice for larger k, where that happens in most
// rows (and its count of the maxima beats the sort). For k = 1 the last block takes the best of the W segment maxima
// (each is its segment's best key) and skips 2-4.
// PICK is the dispatcher's choice for small k (its cost grows with k, the
// sort and searches' does not); TWO and PICK are never set together. The
// count's W x W comparisons beat the sorts and searches in the TWO kernels
// (H200, nvidia-h200/kernels/seg_count.txt: 0.4-1.3 us on 64-128 rows,
// 3-14 us on 263-4096 rows at k >= 33) but not on 64 x 128256 at k = 9-32
// without TWO (0.6-1.2 us slower), hence counting with TWO only.
// MODE: TOPK_ONLINE or TOPK_SELECT. PIPE: step 1 as a software pipeline over
// all the warp's batches (the next batch's packs loaded, raw, before the
// current one is reduced; for UNROLL below the batch of TOPK_SEG_BATCH_ELEMS,
// whose doubled packs fit the register cap: the dispatcher's short segments).
// EF: step 1's whole-pack loads evict-first in L2 (load_pack_once; the
// dispatcher's TOPK_EVICT_FIRST_*_BYTES arrays). Step 3's re-reads stay plain.
// ----------------------------------------------------------------------------
#define TOPK_SEG_THREADS 256
// Blocks per SM topk_seg is built for (its register cap): 4 (64 registers)
// for float compute, 2 for double.
template <typename C> struct SegMinBlocks { enum { value = 4 }; };
template <> struct SegMinBlocks<double> { enum { value = 2 }; };
#define TOPK_SEG_WMAX 256  // segment capacity a row (and workspace row stride)
#define TOPK_SEG_RANK_MAX 256
#define TOPK_SEG_INC 2048
#define TOPK_SEG_KP_MAX 64
// PICK's largest k (the dispatcher's TOPK_SEG_PICK_MAX_K at most)
#define TOPK_SEG_PICK_KMAX 8
#ifndef TOPK_SEG_REREAD_ELEMS
#define TOPK_SEG_REREAD_ELEMS 16
#endif
// Phase-timing hook of tools/prof_seg.py (compiled with -DTOPK_SEG_STOP=n to
// end the kernel after phase n; the library never defines it).
#ifndef TOPK_SEG_STOP
#define TOPK_SEG_STOP 0
#endif
// `keep` (false in practice) uses the phase's results, so the compiler keeps
// the work a stop would otherwise make dead.
#define TOPK_SEG_STOP_AT(n, keep) \
  if (TOPK_SEG_STOP == (n)) {     \
    if (keep) idx[0] = -1;        \
    return;                       \
  }

// Timeline hook of tools/seg_trace.py (-DTOPK_SEG_TRACE: thread 0 of each
// block of rows < 64, segments-blocks < 32 stamps %globaltimer at entry (0)
// and after streaming (1); the row's last block at 2 (elected), 9 (partials
// merged), 7 (keys loaded), 8 (warp sort), 3 (maxima sorted), 4 (ranked), 5
// (candidates collected), 6 (end); the library never defines it).
#ifdef TOPK_SEG_TRACE
__device__ unsigned long long seg_trace[64 * 32 * 16];
#define SEG_T(i)                                                                      \
  do {                                                                                \
    if (threadIdx.x == 0 && blockIdx.y < 64 && blockIdx.x < 32) {                     \
      unsigned long long t_;                                                          \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));                          \
      seg_trace[(blockIdx.y * 32 + blockIdx.x) * 16 + (i)] = t_;                      \
    }                                                                                 \
  } while (0)
#else
#define SEG_T(i)
#endif

// Re-read hook of tools/seg_rereads.py (-DTOPK_SEG_RR_COUNT: the last block
// of row r stores its re-read segments and candidates taken without a
// re-read at seg_rr[2r], [2r + 1]; the library never defines it).
#ifdef TOPK_SEG_RR_COUNT
__device__ int seg_rr[2 * 65536];
#endif

// A chunk of 32 segment maxima (a key a lane) for the last block's ranking:
// PICK, its k best, best first, in lanes 0 .. k - 1 (the other lanes empty),
// by k warp argmaxes; else sorted, best first.
template <typename CT, bool PICK>
CSM_DEVICE typename CT::type seg_chunk_order(typename CT::type c, int lane, i64 k) {
  typedef typename CT::type K;
  if constexpr (PICK) {
    K mine = CT::empty();
    for (int t = 0; t < (int)k; ++t) {
      const K b = warp_best<CT>(c);
      if (lane == t) mine = b;
      if (CT::same(c, b)) c = CT::empty();
    }
    return mine;
  } else {
    return warp_sort_best_first<CT>(c, lane);
  }
}

// topk_seg's stream loads and topk_csm's staging loads: evict-first in L2
// (EF, load_pack_once) or plain.
template <typename T, int PACK, bool EF> CSM_DEVICE Pack<T, PACK> seg_load(const T* p, u64 pol) {
  if constexpr (EF) {
    return load_pack_once<T, PACK>(p, pol);
  } else {
    return load_pack<T, PACK>(p);
  }
}

// The TWO kernels rank their segment maxima by counting (seg_count_better).
// A/B switch of tools (the library never defines it): -DTOPK_SEG_COUNT=0
// ranks them by chunk sorts and binary searches as the other kernels do (the
// tail before stop 51), =1 counts in every tail but PICK's.
#ifndef TOPK_SEG_COUNT
#define TOPK_SEG_COUNT 2
#endif

// How many of keys[0 .. n) are better than c, one thread a key (W x W
// comparisons, the keys read in pairs: 16-byte aligned, and for float compute
// keys[n] empty when n is odd, as topk_seg's chunk stores leave it).
template <typename CT>
CSM_DEVICE int seg_count_better(const typename CT::type* keys, int n, typename CT::type c) {
  int r = 0;
  if constexpr (sizeof(typename CT::type) == 8) {
    const ulonglong2* k2 = reinterpret_cast<const ulonglong2*>(keys);
#pragma unroll 4
    for (int j = 0; j < (n + 1) >> 1; ++j) {
      const ulonglong2 q = k2[j];
      r += (q.x > c) + (q.y > c);
    }
  } else {
    for (int j = 0; j < n; ++j) r += CT::better(keys[j], c) ? 1 : 0;
  }
  return r;
}

template <typename T, typename C, int MODE, int UNROLL, bool PIPE = false, bool EF = false, bool TWO = false,
          bool PICK = false>
__global__ void __launch_bounds__(TOPK_SEG_THREADS, SegMinBlocks<C>::value)
topk_seg(const T* __restrict__ x, void* __restrict__ vals, i64* __restrict__ idx,
         typename Cand<C>::type* __restrict__ wsk, C* __restrict__ wsv, C* __restrict__ wsm,
         unsigned* __restrict__ cnt, i64 L, i64 sx, i64 k, i64 kp, i64 sp, i64 spb, i64 out_code,
         i64 log) {
  typedef Cand<C> CT;
  typedef typename CT::type K;
  constexpr int PACK = 16 / sizeof(T);
  constexpr int E = UNROLL * PACK;
  // packs a thread re-reads at once: TOPK_SEG_REREAD_ELEMS values (half for double compute)
  constexpr int RU = (TOPK_SEG_REREAD_ELEMS / (int)sizeof(C) * 4 / PACK) > 0
                         ? (TOPK_SEG_REREAD_ELEMS / (int)sizeof(C) * 4 / PACK) : 1;
  constexpr int NCH = TOPK_SEG_WMAX / 32;  // chunks of 32 maxima
  static_assert(!(TWO && PICK), "TWO and PICK are separate tails");
  constexpr bool COUNT = (TOPK_SEG_COUNT == 2 && TWO) || (TOPK_SEG_COUNT == 1 && !PICK);
  __shared__ __align__(16) K segk[TOPK_SEG_WMAX];  // segment maxima (chunk-sorted but for COUNT)
  __shared__ K segk2[TWO ? TOPK_SEG_WMAX : 1];  // second candidates by segment (TWO)
  __shared__ C segv[TOPK_SEG_WMAX];  // `second` by segment
  __shared__ int sel[TOPK_SEG_KP_MAX];  // selected segments, best first
  __shared__ K selk[TOPK_SEG_KP_MAX];  // their maxima
  __shared__ int rr[TOPK_SEG_KP_MAX];  // selected segments to re-read
  __shared__ K list[TOPK_SEG_KP_MAX + TOPK_SEG_INC];  // top list, then the incoming slots
  __shared__ MD<C> red_md[32];
  __shared__ K s_tau;
  __shared__ int s_last, s_n, s_nrr;

  const i64 r = blockIdx.y, s = blockIdx.x, S = gridDim.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int tid = threadIdx.x, bd = blockDim.x;
  const T* row = x + r * sx;
  const int mis = row_misalignment<T, PACK>(row);
  const i64 np = row_packs<PACK>(L, mis);
  const int W = (int)((np + sp - 1) / sp);
  K* wk = wsk + r * TOPK_SEG_WMAX;  // (second candidates gridDim.y x TOPK_SEG_WMAX further)
  C* wv = wsv + r * TOPK_SEG_WMAX;

  // ---- 1. stream this block's segments ------------------------------------
  SEG_T(0);
  const u64 pol = EF ? l2_evict_first() : 0ull;
  MD<C> md = md_identity<C>();
  const i64 jb = s * spb, je = min((i64)W, jb + spb);
  if constexpr (PIPE) {
    // the warp's batches over all its segments as one pipeline: the next
    // batch's packs are loaded (raw) before this one is reduced
    if (jb + warp < je) {
      i64 j = jb + warp, base = j * sp, pe = min(np, (j + 1) * sp);
      Pack<T, PACK> cur[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const i64 p = base + u * 32 + lane;
        if (p < pe && p * PACK - mis < L) cur[u] = seg_load<T, PACK, EF>(row + (p * PACK - mis), pol);
      }
      K best = CT::empty();
      C bv = Num<C>::neg_inf(), v1 = Num<C>::neg_inf(), v2 = Num<C>::neg_inf();
      while (true) {
        i64 nj = j, nb = base + 32 * UNROLL, npe = pe;
        if (nb >= pe) {
          nj = j + nw;
          nb = nj * sp;
          npe = min(np, (nj + 1) * sp);
        }
        const bool more = nj < je;
        Pack<T, PACK> nx[UNROLL];
        if (more) {
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) {
            const i64 p = nb + u * 32 + lane;
            if (p < npe && p * PACK - mis < L) nx[u] = seg_load<T, PACK, EF>(row + (p * PACK - mis), pol);
          }
        }
        C v[E];
        unsigned mask = 0u;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const i64 p = base + u * 32 + lane;
          const i64 c0 = p * PACK - mis;
          if (p < pe && c0 >= 0 && c0 + PACK <= L) {
#pragma unroll
            for (int e = 0; e < PACK; ++e) v[u * PACK + e] = to_compute<C>(cur[u].v[e]);
            mask |= ((1u << PACK) - 1u) << (u * PACK);
          } else {
#pragma unroll
            for (int e = 0; e < PACK; ++e) {
              const bool in = p < pe && c0 + e >= 0 && c0 + e < L;
              v[u * PACK + e] = in ? to_compute<C>(cur[u].v[e]) : Num<C>::neg_inf();
              if (in) mask |= 1u << (u * PACK + e);
            }
          }
        }
        if (MODE == TOPK_ONLINE) md_accumulate<C, E>(md, v);
        seg_batch_best<CT, E, PACK>(v, mask, base, lane, mis, best, bv, v1, v2);
        if (nj != j) {  // the end of segment j
          seg_end<CT, TWO>(best, v1, v2, lane, wk + j, (i64)gridDim.y * TOPK_SEG_WMAX, wv + j);
          best = CT::empty();
          bv = v1 = v2 = Num<C>::neg_inf();
        }
        if (!more) break;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) cur[u] = nx[u];
        j = nj;
        base = nb;
        pe = npe;
      }
    }
  } else {
    for (i64 j = jb + warp; j < je; j += nw) {
      const i64 pe = min(np, (j + 1) * sp);
      K best = CT::empty();
      C bv = Num<C>::neg_inf();  // value of best when best is not NaN / empty
      C v1 = Num<C>::neg_inf(), v2 = Num<C>::neg_inf();  // lane's two largest values (NaN skipped)
      for (i64 base = j * sp; base < pe; base += 32 * UNROLL) {
        C v[E];
        unsigned mask = 0u;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const i64 p = base + u * 32 + lane;
          const i64 c0 = p * PACK - mis;
          if (p < pe && c0 >= 0 && c0 + PACK <= L) {
            const Pack<T, PACK> pk = seg_load<T, PACK, EF>(row + c0, pol);
#pragma unroll
            for (int e = 0; e < PACK; ++e) v[u * PACK + e] = to_compute<C>(pk.v[e]);
            mask |= ((1u << PACK) - 1u) << (u * PACK);
          } else if (p < pe) {
            load_row_pack<C, T, PACK>(row, p, mis, L, Num<C>::neg_inf(), v + u * PACK);
#pragma unroll
            for (int e = 0; e < PACK; ++e)
              if (c0 + e >= 0 && c0 + e < L) mask |= 1u << (u * PACK + e);
          } else {
#pragma unroll
            for (int e = 0; e < PACK; ++e) v[u * PACK + e] = Num<C>::neg_inf();
          }
        }
        if (MODE == TOPK_ONLINE) md_accumulate<C, E>(md, v);
        seg_batch_best<CT, E, PACK>(v, mask, base, lane, mis, best, bv, v1, v2);
      }
      seg_end<CT, TWO>(best, v1, v2, lane, wk + j, (i64)gridDim.y * TOPK_SEG_WMAX, wv + j);
    }
  }
  SEG_T(1);
  TOPK_SEG_STOP_AT(1, md.d == C(-1) || md.m == C(-7));
  if (MODE == TOPK_ONLINE) {
    md = topk_block_md<C>(md, red_md);
    if (tid == 0) {
      wsm[2 * (r * S + s)] = md.m;
      wsm[2 * (r * S + s) + 1] = md.d;
    }
  }
  // release this block's writes and count it in (acquire the others' if last):
  // the barrier orders the block's writes before thread 0's acq_rel atomic
  __syncthreads();
  if (tid == 0) {
    unsigned t;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(t) : "l"(cnt + r) : "memory");
    s_last = t == (unsigned)(S - 1);
  }
  __syncthreads();
  if (!s_last) return;
  TOPK_SEG_STOP_AT(2, false);

  // ---- 2. the last block of the row ----------------------------------------
  SEG_T(2);
  if (tid == 0) {
    cnt[r] = 0u;  // ready for the next launch
    s_n = 0;
    s_nrr = 0;
    s_tau = CT::empty();
  }
  if (k == 1) {  // the row's best is the best segment maximum: no ranking, no re-read
    // a thread's first key and first partial loaded together, before any
    // loop (H100, tools/ab_seg.py: 1 x 32768 8.3 us against 10.9 with the
    // partials' loop first)
    K b = tid < W ? CT::ldcg(wk + tid) : CT::empty();
    md = md_identity<C>();
    if (MODE == TOPK_ONLINE && tid < S) md = seg_partial<C>(wsm, r, S, tid);
    for (int i = tid + bd; i < W; i += bd) {
      const K c = CT::ldcg(wk + i);
      if (CT::better(c, b)) b = c;
    }
    for (i64 j = tid + bd; MODE == TOPK_ONLINE && j < S; j += bd) md = md_merge(md, seg_partial<C>(wsm, r, S, j));
    b = warp_best<CT>(b);
    if (lane == 0) segk[warp] = b;
    if (MODE == TOPK_ONLINE) {
      md = topk_block_md<C>(md, red_md);  // its barriers publish segk[]
    } else {
      __syncthreads();
    }
    if (tid == 0) {
      for (int w = 1; w < nw; ++w)
        if (CT::better(segk[w], b)) b = segk[w];
      list[0] = b;
    }
    topk_write<C, MODE>(list, md, vals, idx, r, 1, out_code, log);  // (thread 0 writes)
    SEG_T(6);
    return;
  }
  const int KP = (int)kp;
  K* top = list;
  K* inc = list + KP;
  for (int i = tid; i < KP; i += bd) top[i] = CT::empty();
  // each warp sorts chunks of 32 maxima, best first (the first chunk's loads
  // issued together with the (m, d) partials')
  const int nchunk = (W + 31) >> 5;
  const int i0 = warp * 32 + lane;
  const K* wk2 = wk + (i64)gridDim.y * TOPK_SEG_WMAX;  // (TWO)
  K c0 = CT::empty(), c2 = CT::empty();
  C v0 = C(0);
  if (i0 < W) {
    c0 = CT::ldcg(wk + i0);
    if constexpr (TWO) c2 = CT::ldcg(wk2 + i0);
    v0 = __ldcg(wv + i0);
  }
  md = MODE == TOPK_ONLINE ? seg_partials_md<C>(wsm, r, S) : md_identity<C>();
#ifdef TOPK_SEG_TRACE
  if (md.d == C(-3)) idx[1] = -1;  // md's loads done before point 9
#endif
  SEG_T(9);
  if (warp < nchunk) {
    if (i0 < W) {
      segv[i0] = v0;
      if constexpr (TWO) segk2[i0] = c2;
    }
    SEG_T(7);
    segk[i0] = COUNT ? c0 : seg_chunk_order<CT, PICK>(c0, lane, k);
    SEG_T(8);
  }
  for (int ch = warp + nw; ch < nchunk; ch += nw) {
    const int i = ch * 32 + lane;
    K c = CT::empty();
    if (i < W) {
      c = CT::ldcg(wk + i);
      if constexpr (TWO) segk2[i] = CT::ldcg(wk2 + i);
      segv[i] = __ldcg(wv + i);
    }
    segk[i] = COUNT ? c : seg_chunk_order<CT, PICK>(c, lane, k);
  }
  if (MODE == TOPK_ONLINE) {
    md = topk_block_md<C>(md, red_md);  // its barriers publish segk[], segk2[], segv[]
  } else {
    __syncthreads();
  }
  SEG_T(3);
  TOPK_SEG_STOP_AT(3, md.d == C(-1) || CT::hi(segk[tid % TOPK_SEG_WMAX]) == 7u || segv[tid % TOPK_SEG_WMAX] == C(-7));
  const int nsel = (int)min((i64)W, k);
  if constexpr (PICK) {
    // warp 0 takes the row's nsel best of the chunks' k best (candidate q =
    // chunk q / k, place q % k), one warp argmax a rank
    if (warp == 0) {
      constexpr int QU = (NCH * TOPK_SEG_PICK_KMAX + 31) / 32;  // a lane's candidates
      const int nq = nchunk * (int)k;
      K a[QU];
#pragma unroll
      for (int u = 0; u < QU; ++u) {
        const int q = u * 32 + lane;
        a[u] = q < nq ? segk[(q / (int)k) * 32 + q % (int)k] : CT::empty();
      }
      for (int t = 0; t < nsel; ++t) {
        K lb = a[0];
#pragma unroll
        for (int u = 1; u < QU; ++u)
          if (CT::better(a[u], lb)) lb = a[u];
        const K b = warp_best<CT>(lb);
#pragma unroll
        for (int u = 0; u < QU; ++u)
          if (CT::same(a[u], b)) a[u] = CT::empty();
        if (lane == 0) {
          sel[t] = (int)((CT::index(b) + mis) / PACK / sp);
          selk[t] = b;
          if (W > k && t == k - 1) s_tau = b;
        }
      }
    }
  } else if constexpr (COUNT) {
    for (int i = tid; i < W; i += bd) {
      const K c = segk[i];
      const int rank = seg_count_better<CT>(segk, W, c);
      if (rank < nsel) {
        sel[rank] = (int)((CT::index(c) + mis) / PACK / sp);
        selk[rank] = c;
      }
      if (W > k && rank == k - 1) s_tau = c;
    }
  } else {
    for (int i = tid; i < nchunk * 32; i += bd) {
      const K c = segk[i];
      if (!CT::same(c, CT::empty())) {
        const int a = i >> 5;
        // binary searches in the other chunks, interleaved (independent loads)
        int lo[NCH];
#pragma unroll
        for (int b = 0; b < NCH; ++b) lo[b] = 0;
#pragma unroll
        for (int step = 16; step > 0; step >>= 1) {
#pragma unroll
          for (int b = 0; b < NCH; ++b)
            if (b < nchunk && CT::better(segk[b * 32 + lo[b] + step - 1], c)) lo[b] += step;
        }
        // the steps reach 31 at most: a chunk all better than c counts 32 (else
        // two maxima share a rank and a selected segment is lost: rows whose
        // segment maxima fall along the row, k > 32)
#pragma unroll
        for (int b = 0; b < NCH; ++b)
          if (b < nchunk && CT::better(segk[b * 32 + lo[b]], c)) lo[b] += 1;
        int rank = i & 31;
#pragma unroll
        for (int b = 0; b < NCH; ++b)
          if (b != a) rank += lo[b];
        if (rank < nsel) {
          sel[rank] = (int)((CT::index(c) + mis) / PACK / sp);
          selk[rank] = c;
        }
        if (W > k && rank == k - 1) s_tau = c;
      }
    }
  }
  __syncthreads();
  SEG_T(4);
  TOPK_SEG_STOP_AT(4, md.d == C(-1) || CT::hi(s_tau) == 7u || sel[tid % TOPK_SEG_KP_MAX] == -7 || CT::hi(selk[tid % TOPK_SEG_KP_MAX]) == 7u);
  K tau = s_tau;

  // ---- 3. candidates: selected segments' elements not worse than tau -----
  {
    // re-read unless every element of the segment but its stored candidates
    // (the best; TWO: and the second) is below tau's value (always when tau is
    // empty, W <= k, or a NaN)
    const bool tau_val = CT::hi(tau) != 0;
    const C tv = tau_val ? CT::value(tau) : C(0);
    for (int t = tid; t < nsel; t += bd) {
      const int j = sel[t];
      if (tau_val && segv[j] < tv) {
        if constexpr (TWO) {
          const K c2t = segk2[j];
          const bool two = !CT::better(tau, c2t);
          const int pos = atomicAdd(&s_n, two ? 2 : 1);
          inc[pos] = selk[t];
          if (two) inc[pos + 1] = c2t;
        } else {
          inc[atomicAdd(&s_n, 1)] = selk[t];
        }
      } else {
        rr[atomicAdd(&s_nrr, 1)] = j;
      }
    }
  }
  __syncthreads();
#ifdef TOPK_SEG_RR_COUNT  // diagnostic: segments re-read and candidates taken without a re-read, by row
  if (tid == 0) {
    seg_rr[2 * r] = s_nrr;
    seg_rr[2 * r + 1] = s_n;
  }
#endif
  const int spi = (int)sp;
  {
    const int P = s_nrr * spi;  // packs to re-read
    for (int t0 = 0; t0 < P; t0 += bd * RU) {
      C v[RU * PACK];
      i64 pp[RU];
#pragma unroll
      for (int u = 0; u < RU; ++u) {
        const int t = t0 + u * bd + tid;
        pp[u] = -1;
        if (t < P) {
          const i64 p = (i64)rr[t / spi] * sp + t % spi;
          if (p < np) pp[u] = p;
        }
        if (pp[u] >= 0) {
          load_row_pack<C, T, PACK>(row, pp[u], mis, L, Num<C>::neg_inf(), v + u * PACK);
        }
      }
#pragma unroll
      for (int u = 0; u < RU; ++u) {
        if (pp[u] < 0) continue;
#pragma unroll
        for (int e = 0; e < PACK; ++e) {
          const i64 col = pp[u] * PACK - mis + e;
          if (col >= 0 && col < L) {
            const K c = CT::make(v[u * PACK + e], col);
            if (!CT::better(tau, c)) {
              const int pos = atomicAdd(&s_n, 1);
              if (pos < TOPK_SEG_INC) inc[pos] = c;
            }
          }
        }
      }
    }
  }
  __syncthreads();
  SEG_T(5);
  TOPK_SEG_STOP_AT(5, md.d == C(-1) || s_n == -7 || CT::hi(inc[tid]) == 7u);
  const int n = s_n;
  if (n <= TOPK_SEG_RANK_MAX) {
    // ---- 4a. output position = rank among the candidates ------------------
    C sc = C(0);
    if (MODE != TOPK_SELECT) sc = log ? Num<C>::log(md.d) : Num<C>::rcp(md.d);
    for (int i = tid; i < n; i += bd) {
      const K c = inc[i];
      int rank = 0;
      for (int j = 0; j < n; ++j) rank += CT::better(inc[j], c) ? 1 : 0;
      if (rank < k) {
        idx[r * k + rank] = CT::index(c);
        if (MODE != TOPK_SELECT) {
          const C xv = CT::value(c);
          const C y = log ? (xv - md.m) - sc : Num<C>::exp(xv - md.m) * sc;
          topk_store<C>(vals, r * k + rank, y, out_code);
        }
      }
    }
#ifdef TOPK_SEG_TRACE
    __syncthreads();
#endif
    SEG_T(6);
    return;
  }
  if (n <= TOPK_SEG_INC) {
    // ---- 4b. one compaction --------------------------------------------------
    group_compact<CT>(top, n, KP, tid, bd, true);
  } else {
    // ---- 4c. overflow: every selected segment, one element per thread per round
    __syncthreads();
    if (tid == 0) s_n = 0;
    int n_in = 0;  // block-uniform
    const i64 total = (i64)nsel * sp * PACK;
    for (i64 e0 = 0; e0 < total; e0 += bd) {
      const i64 e = e0 + tid;
      K c = CT::empty();
      bool take = false;
      if (e < total) {
        const int t = (int)(e / PACK), q = (int)(e % PACK);
        const i64 p = (i64)sel[t / spi] * sp + t % spi;
        const i64 col = p * PACK - mis + q;
        if (p < np && col >= 0 && col < L) {
          c = CT::make(to_compute<C>(row[col]), col);
          take = !CT::better(tau, c);
        }
      }
      int cnt_take = __syncthreads_count(take);
      if (cnt_take == 0) continue;
      if (n_in + cnt_take > TOPK_SEG_INC) {
        group_compact<CT>(top, n_in, KP, tid, bd, true);
        n_in = 0;
        if (tid == 0) s_n = 0;
        const K kt = top[k - 1];
        if (CT::better(kt, tau)) tau = kt;
        take = take && !CT::better(tau, c);
        cnt_take = __syncthreads_count(take);
      }
      if (take) inc[atomicAdd(&s_n, 1)] = c;
      n_in += cnt_take;
    }
    if (n_in > 0) group_compact<CT>(top, n_in, KP, tid, bd, true);
  }
  __syncthreads();
  topk_write<C, MODE>(top, md, vals, idx, r, k, out_code, log);
  SEG_T(6);
}

// ----------------------------------------------------------------------------
// topk_csm: few rows, k <= TOPK_CSM_KP_MAX, float compute, one launch, the row
// read once from DRAM and staged on chip: one thread-block cluster of CS
// blocks per row (grid (CS, rows); the dispatcher picks it on sm_90 only),
// block b holding packs [b * ppb, (b + 1) * ppb) of the row in its shared
// memory (the threads' own 16-byte loads, TOPK_CSM_LDG_U packs in flight a
// thread, each stored and scanned from registers as it lands). Thread t
// takes packs t (mod the block size) in every pass.
//   1. Each block scans its packs: the (m, d) partial and, for each of its
//      TOPK_CSM_GROUPS / CS groups of GL = 4 x CS lanes, the group's best
//      candidate. The maxima go to every block and the partials to block 0.
//      k = 1: block 0 takes the best group maximum and is done.
//   2. Every block takes tau = (v, 0), v the k-th largest value among the
//      row's TOPK_CSM_GROUPS group maxima (ranks by counting value words:
//      for k > 1 only those are exchanged, 4 bytes a group; for k <=
//      TOPK_CSM_COARSE_K among the maxima of four groups each, which one
//      warp ranks). At least k distinct elements have values >= v, so the
//      row's top k are not worse than tau.
//   3. Every block writes its elements not worse than tau to its SLOT =
//      TOPK_CSM_CAP / CS slots in block 0 (the unused ones as empty keys, so
//      block 0 expects a fixed number of bytes and waits once) and its count
//      to every block. A thread's batch of TOPK_CSM_LDG_U staged packs whose
//      largest value (kept from step 1, rounded up) is below tau's is
//      skipped in one comparison: typical rows read almost none of the
//      staged row again, and the pass's code is mostly not run (cold code:
//      0.5-3 us saved; bench/results/nvidia-h200/kernels/csm_ldg.txt).
//   4. Every count within its slots (typical rows: a little over k in all):
//      block 0 makes the slots contiguous, ranks the candidates by counting
//      and writes the results (up to 96 candidates: 1-4 warps, each taking
//      candidates lane, lane + 32, .. and counting the better ones in its
//      share of the list; this runs once, so it is kept to few
//      instructions). Otherwise (rows of ties, sorted rows: the
//      maxima's groups hold many candidates) the cluster finds a tighter
//      tau by radix selection over the 64-bit keys of its staged elements
//      (8-bit digits, a histogram a round summed in block 0, stopping once at
//      most TOPK_CSM_CAP keys are not worse than the selected prefix; at the
//      last digit it is the exact k-th best), counts again, exchanges the
//      counts and writes each block's candidates at its offset in block 0.
// The exchanges of 1 and 3 go through distributed shared memory by st.async,
// each counted in bytes on an mbarrier of the receiving block (whose threads
// wait on it), not through cluster barriers: on H100 a cluster barrier's
// release / acquire costs a GPU-scope memory barrier, about 900 cycles
// (tools/csm_trace.py). A start barrier (arrived at on entry, after the
// mbarriers are initialised, and waited on while the packs are in flight,
// before the scan and any remote write) makes sure every block has begun;
// every block waits for every byte sent to it before it exits. The radix
// fallback (rare) keeps cluster barriers. EF: the loads evict-first in L2
// (the dispatcher's TOPK_EVICT_FIRST_*_BYTES arrays; see load_pack_once).
// ----------------------------------------------------------------------------
#define TOPK_CSM_THREADS 512
#define TOPK_CSM_GROUPS 128
#define TOPK_CSM_CAP 512
#define TOPK_CSM_KP_MAX 64
// k up to this takes tau from G / 4 coarser maxima (one warp; see phase 2)
#ifndef TOPK_CSM_COARSE_K
#define TOPK_CSM_COARSE_K 16
#endif
// threads a key in tau's ranking of the G group maxima (1, 2 or 4: G x this
// threads take part; H100, tools/csm_try.py ab, kernels/csm_ab2.txt: 1 is
// 0.1-0.3 us ahead of 4 at k = 50, one warp a scheduler instead of four)
#ifndef TOPK_CSM_TAU_PARTS
#define TOPK_CSM_TAU_PARTS 1
#endif
// Phase-timing hook of tools/csm_try.py (-DTOPK_CSM_STOP=n ends the kernel
// after phase n; the library never defines it).
#ifndef TOPK_CSM_STOP
#define TOPK_CSM_STOP 0
#endif
#define TOPK_CSM_STOP_AT(n, keep, wait)                                                  \
  if (TOPK_CSM_STOP == (n)) {                                                               \
    if (keep) idx[0] = -1;                                                                  \
    if constexpr (CS > 1 && (wait)) asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); \
    return;                                                                                 \
  }

// Timeline hook of tools/csm_trace.py (-DTOPK_CSM_TRACE: thread 0 of each
// block of rows < 64 stamps %globaltimer and clock64 at points 0-10; the
// library never defines it).
#ifdef TOPK_CSM_TRACE
__device__ unsigned long long csm_trace[64 * 16 * 16 * 2];
#define CSM_T(i)                                                           \
  do {                                                                     \
    if (threadIdx.x == 0 && blockIdx.y < 64) {                             \
      unsigned long long t_;                                               \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_));               \
      const unsigned o_ = ((blockIdx.y * 16 + blockIdx.x) * 16 + (i)) * 2; \
      csm_trace[o_] = t_;                                                  \
      csm_trace[o_ + 1] = (unsigned long long)clock64();                   \
    }                                                                      \
  } while (0)
// CSM_TV(i, v): a value instead of a time at point i (thread 0 of the block).
#define CSM_TV(i, v)                                                              \
  do {                                                                            \
    if (threadIdx.x == 0 && blockIdx.y < 64)                                      \
      csm_trace[((blockIdx.y * 16 + blockIdx.x) * 16 + (i)) * 2] = (unsigned long long)(v); \
  } while (0)
#else
#define CSM_T(i)
#define CSM_TV(i, v)
#endif

#ifndef TOPK_CSM_PIECES
#define TOPK_CSM_PIECES 8
#endif
// Block 0's final ranking: up to 32 x TOPK_CSM_FAST_PER_LANE candidates by
// up to TOPK_CSM_FAST_WARPS warps (TOPK_CSM_FAST_RANK = 0, an experiment
// switch: the general path of every warp).
#ifndef TOPK_CSM_FAST_RANK
#define TOPK_CSM_FAST_RANK 1
#endif
#ifndef TOPK_CSM_FAST_PER_LANE
#define TOPK_CSM_FAST_PER_LANE 3
#endif
#ifndef TOPK_CSM_FAST_WARPS
#define TOPK_CSM_FAST_WARPS 4
#endif
// Staging: the threads' own 16-byte loads, TOPK_CSM_LDG_U packs in flight a
// thread, each scanned from registers and stored (H200, bench/results/
// nvidia-h200/kernels/csm_ldg.txt: against bulk copies, 0.16-0.62 us faster
// at k = 1 and -0.54 .. +0.48 us at k = 5 / 50 with the variants' launches
// interleaved (run 8); run 1: staging alone by loads 0.1-0.6 us above
// the pure-read floor, by bulk copies further). TOPK_CSM_LDG = 0, an
// experiment switch: bulk copies (TMA) of up to TOPK_CSM_PIECES pieces,
// each scanned as it lands.
#ifndef TOPK_CSM_LDG
#define TOPK_CSM_LDG 1
#endif
#ifndef TOPK_CSM_LDG_U
#define TOPK_CSM_LDG_U 4
#endif
// Launch bound: two blocks an SM (64 registers a thread), so that where two
// blocks' shared memory fits an SM, the GPU holds more clusters at once (16
// rows in clusters of 8 on 132 SMs: one block an SM fits 15 clusters of 8).
#ifndef TOPK_CSM_MIN_BLOCKS
#define TOPK_CSM_MIN_BLOCKS 2
#endif
#ifndef TOPK_CSM_PIECE_PACKS
#define TOPK_CSM_PIECE_PACKS 1024
#endif
// topk_csm is sm_90 code (clusters, mbarriers, st.async). With TOPK_CSM_LDG =
// 0 a block's packs arrive by bulk copies (TMA), completion counted by an
// mbarrier a piece (and TOPK_CSM_NO_BULK, an experiment switch: by cp.async).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#ifndef TOPK_CSM_NO_BULK
#define TOPK_CSM_BULK 1
#else
#define TOPK_CSM_BULK 0
#endif
// EF: the copy is evict-first in L2 (see load_pack_once).
template <bool EF> CSM_DEVICE void csm_bulk_g2s(void* dst, const void* src, unsigned bytes, u64* m) {
  if constexpr (EF) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            csm_smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(csm_smem_addr(m)), "l"(l2_evict_first())
        : "memory");
  } else {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     csm_smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(csm_smem_addr(m))
                 : "memory");
  }
}
#else
#define TOPK_CSM_BULK 0
#endif

// `p` (this block's shared memory) in block `rank` of the cluster (itself if CS = 1).
template <int CS, typename P> CSM_DEVICE P* csm_rank(P* p, unsigned rank) {
  if constexpr (CS > 1) {
    u64 out;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(out) : "l"((u64)p), "r"(rank));
    return reinterpret_cast<P*>(out);
  } else {
    return p;
  }
}
template <int CS> CSM_DEVICE void csm_sync() {
  if constexpr (CS > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }
}

// The row's first or last pack (columns c0 .. c0 + PACK - 1 outside [0, L)):
// the outside elements become -inf; true if the pack was one of those.
template <typename C, typename T, int PACK> CSM_DEVICE bool csm_pad_edge(Pack<T, PACK>& pk, i64 c0, i64 L) {
  if (c0 >= 0 && c0 + PACK <= L) return false;
#pragma unroll
  for (int e = 0; e < PACK; ++e)
    if (c0 + e < 0 || c0 + e >= L) pk.v[e] = from_compute<T>(Num<C>::neg_inf());
  return true;
}

// The staging loop's batch maxima (a thread's TOPK_CSM_LDG_U packs a batch),
// kept as bfloat16 bits rounded towards +inf (an upper bound; NaN ignored as
// by fmaxf), so the candidate pass skips a batch below tau in one compare.
// They share ghist's 8 KiB (the radix fallback's, zeroed after the pass).
#define TOPK_CSM_BMAX_BATCHES 8
// TOPK_CSM_BMAX = 0, an experiment switch: the candidate pass tests every pack.
#ifndef TOPK_CSM_BMAX
#define TOPK_CSM_BMAX 1
#endif
CSM_DEVICE unsigned short csm_bmax_bits(float f) {
  const unsigned u = __float_as_uint(f);
  // positive: round the magnitude up; negative: truncating the magnitude rounds up
  return (unsigned short)((u >> 31) ? (u >> 16) : ((u + 0xffffu) >> 16));
}
CSM_DEVICE float csm_bmax_value(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

// Counts this block's staged elements whose keys are not worse than tau in
// *lcnt (shared, zeroed by the caller) and writes the first `cap` of them:
// ASYNC, by st.async at shared::cluster address dst_sc (8 bytes apart, each
// counted on the mbarrier at mb_sc); else to dst (nothing when cap is 0).
// Four packs a thread are loaded at once, and a pack whose largest value is
// below tau's costs one comparison.
template <typename T, int PACK, bool ASYNC>
CSM_DEVICE void csm_filter(const Pack<T, PACK>* chunk, int nb, i64 c00, i64 L, u64 tau, unsigned* lcnt,
                           u64* dst, unsigned dst_sc, unsigned mb_sc, unsigned cap,
                           const unsigned short* bmax = nullptr) {
  typedef Cand<float> CT;
  constexpr int U = TOPK_CSM_LDG_U;  // = the staging loop's batch (bmax: one bound a batch)
  const bool tv = CT::hi(tau) != 0u;  // tau is a value (else: NaN key or empty, test every key)
  const float tf = tv ? CT::prefilter_value(CT::hi(tau)) : 0.0f;
  const int bd = blockDim.x;
  for (int q0 = threadIdx.x, bi = 0; q0 < nb; q0 += U * bd, ++bi) {
    // a batch whose packs' largest value (rounded up) is below tau's: one comparison
    if (bmax != nullptr && tv && bi < TOPK_CSM_BMAX_BATCHES &&
        !(csm_bmax_value(bmax[bi * bd + threadIdx.x]) >= tf))
      continue;
    Pack<T, PACK> pk[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (q0 + u * bd < nb) pk[u] = chunk[q0 + u * bd];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int q = q0 + u * bd;
      if (q >= nb) break;
      float mx = to_compute<float>(pk[u].v[0]);
#pragma unroll
      for (int e = 1; e < PACK; ++e) mx = fmaxf(mx, to_compute<float>(pk[u].v[e]));
      if (tv && !(mx >= tf)) continue;  // NaN is ignored by fmaxf and below every value key
      const i64 c0 = c00 + (i64)q * PACK;
#pragma unroll
      for (int e = 0; e < PACK; ++e) {
        const float v = to_compute<float>(pk[u].v[e]);
        if (!tv || v >= tf) {
          const i64 col = c0 + e;
          if (col >= 0 && col < L) {
            const u64 c = CT::make(v, col);
            if (!CT::better(tau, c)) {
              const unsigned pos = atomicAdd(lcnt, 1u);
              if (pos < cap) {
                if constexpr (ASYNC) {
                  csm_st_async(dst_sc + 8u * pos, c, mb_sc);
                } else {
                  dst[pos] = c;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Writes v to element i of array `a` (shared memory) in every block of the
// cluster by st.async, counted on each block's mbarrier `mb` (CS = 1: a plain
// store, published by the block barrier of csm_xwait; shared::cluster
// accesses need a cluster of two blocks or more).
template <int CS, typename P> CSM_DEVICE void csm_put_all(P* a, int i, P v, u64* mb) {
  if constexpr (CS > 1) {
#pragma unroll
    for (int j = 0; j < CS; ++j)
      csm_st_async(cluster_map_shared(a + i, (unsigned)j), v, cluster_map_shared(mb, (unsigned)j));
  } else {
    a[i] = v;
  }
}
// Waits for the bytes st.async sent to this block on mbarrier m (CS = 1: a
// block barrier).
template <int CS> CSM_DEVICE void csm_xwait(u64* m) {
  if constexpr (CS > 1) {
    csm_mbar_wait_cluster(m);
  } else {
    __syncthreads();
  }
}

template <typename T, int CS, bool EF = false>
__global__ void CSM_CLUSTER_DIMS(CS) __launch_bounds__(TOPK_CSM_THREADS, TOPK_CSM_MIN_BLOCKS)
topk_csm(const T* __restrict__ x, void* __restrict__ vals, i64* __restrict__ idx, i64 L, i64 sx, i64 k,
         i64 ppb, i64 out_code, i64 log) {
  typedef float C;
  typedef Cand<C> CT;
  typedef u64 K;
  constexpr int PACK = 16 / sizeof(T);
  constexpr int G = TOPK_CSM_GROUPS, GB = G / CS, GL = TOPK_CSM_THREADS / GB;
  constexpr int SLOT = TOPK_CSM_CAP / CS;  // block 0's candidate slots a block
  static_assert(GL >= 1 && GL <= 32 && GB * GL == TOPK_CSM_THREADS, "group shape");
  typedef Pack<T, PACK> PK;
  extern __shared__ __align__(16) unsigned char topk_smem[];
  PK* chunk = reinterpret_cast<PK*>(topk_smem);
  __shared__ __align__(16) K gkey[G];  // the row's group maxima (every block; k = 1)
  __shared__ __align__(16) unsigned gval[G];  // their value words (every block; k > 1)
  __shared__ K cand[TOPK_CSM_CAP];    // block 0: candidates, SLOT a block
  __shared__ __align__(16) K cand2[TOPK_CSM_CAP];   // block 0: candidates, contiguous
  __shared__ __align__(8) MD<C> mdp[CS];  // block 0: the blocks' (m, d) (st.async v2: 8-byte aligned)
  __shared__ unsigned cnts[2][CS];    // every block: the blocks' candidate counts (pass 1, radix pass)
  __shared__ MD<C> red_md[32];
  __shared__ unsigned hist[256];
  __shared__ __align__(16) unsigned ghist[8][256];  // block 0: radix histograms by round
  // (LDG) the staging batches' maxima, bf16 rounded up, batch-major (see csm_bmax_bits)
  unsigned short* bmax = reinterpret_cast<unsigned short*>(&ghist[0][0]);
  static_assert(sizeof(ghist) >= TOPK_CSM_BMAX_BATCHES * TOPK_CSM_THREADS * sizeof(unsigned short), "bmax");
  __shared__ unsigned s_cnt[3];       // this block's counts (pass 1, radix count, radix write)
  __shared__ unsigned s_tau_hi;
  __shared__ int s_dig;
  __shared__ unsigned s_above;
  // exchange mbarriers, fed by st.async: 0 group maxima (+ block 0: the
  // (m, d) partials), 1 counts (+ block 0: every block's slots)
  __shared__ __align__(8) u64 xmb[2];
  __shared__ int fast_rank[TOPK_CSM_FAST_WARPS > 1 ? TOPK_CSM_FAST_WARPS - 1 : 1][32 * TOPK_CSM_FAST_PER_LANE];  // block 0: ranks (warps 1..)

  const unsigned b = blockIdx.x;  // the cluster spans grid.x: b is the block's rank
  const i64 r = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31;
  const T* row = x + r * sx;
  const int mis = row_misalignment<T, PACK>(row);
  const i64 np = row_packs<PACK>(L, mis);
  const i64 p0 = (i64)b * ppb;
  const int nb = (int)max((i64)0, min(np - p0, ppb));
  const i64 c00 = p0 * PACK - mis;  // column of this block's first element

  CSM_T(0);
#if !TOPK_CSM_LDG
  // ---- stage this block's packs: pieces of TOPK_CSM_PIECE_PACKS packs or more,
  // at most TOPK_CSM_PIECES, each scanned as it lands
  const int npc = max(1, min(TOPK_CSM_PIECES, nb / TOPK_CSM_PIECE_PACKS));
  const int pp = (nb + npc - 1) / npc;
#endif
#if TOPK_CSM_BULK && !TOPK_CSM_LDG
  // a thread a piece: its mbarrier, then at once its bulk copy (whole aligned
  // packs); the barrier below publishes the mbarriers to the block
  __shared__ __align__(8) u64 mbar[TOPK_CSM_PIECES];
  if (tid < npc) {
    csm_mbar_init(mbar + tid);
    csm_mbar_fence_init();
  }
  __syncwarp();  // (the inits run as one warp-uniform loop)
  if (tid < npc) {
    const int qa = tid * pp, qb = min(nb, qa + pp);
    if (qb > qa) {
      const unsigned bytes = (unsigned)(qb - qa) * 16u;
      csm_mbar_expect(mbar + tid, bytes);
      csm_bulk_g2s<EF>(chunk + qa, row + (c00 + (i64)qa * PACK), bytes, mbar + tid);
    } else {
      csm_mbar_arrive(mbar + tid);
    }
  }
#endif
  if (CS > 1 && tid == 32) {  // the exchanges' bytes: G keys (+ CS partials); CS counts (+ CS x SLOT slot keys)
    for (int i = 0; i < 2; ++i) csm_mbar_init(xmb + i);
    csm_mbar_expect(xmb, (unsigned)(G * (k == 1 ? sizeof(K) : sizeof(unsigned)) + (b == 0 ? CS * sizeof(MD<C>) : 0)));
    csm_mbar_expect(xmb + 1, (unsigned)(CS * sizeof(unsigned) + (b == 0 ? CS * SLOT * sizeof(K) : 0)));
    csm_mbar_fence_init();
  }
  __syncthreads();
  // every block of the cluster must have started (and initialised its
  // mbarriers) before any writes to its shared memory: arrive now, wait
  // after the scan (TOPK_CSM_LDG = 0: while the bulk copies are in flight;
  // the blocks of a cluster start together, so the wait is short)
  if constexpr (CS > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  TOPK_CSM_STOP_AT(9, nb == 7, true);
  if (tid < 3) s_cnt[tid] = 0u;
  if (tid == 0) s_tau_hi = 0xffffffffu;
  CSM_T(1);
#if !TOPK_CSM_LDG
  if constexpr (CS > 1) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
#endif
#if !TOPK_CSM_BULK && !TOPK_CSM_LDG
  for (int q = tid; q < nb; q += TOPK_CSM_THREADS) cp_async16(chunk + q, row + (c00 + (i64)q * PACK));
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
#endif

#if TOPK_CSM_BULK && !TOPK_CSM_LDG
  if (TOPK_CSM_STOP == 10) {
    for (int pc = 0; pc < npc; ++pc) csm_mbar_wait(mbar + pc, 0u);
    TOPK_CSM_STOP_AT(10, to_compute<C>(chunk[tid % max(nb, 1)].v[0]) == C(-7), false);
  }
#endif
  // ---- 1. (m, d) and group maxima -------------------------------------------
  MD<C> md = md_identity<C>();
  K best = CT::empty();
  C bv = Num<C>::neg_inf();
#if TOPK_CSM_LDG
  // LDG staging: TOPK_CSM_LDG_U packs a thread in flight, each stored to the
  // chunk and scanned from registers (same packs a thread as the later passes)
  constexpr int LU = TOPK_CSM_LDG_U;
  const T* rbase = row + c00;
  const u64 pol = EF ? l2_evict_first() : 0ull;
  for (int q0 = tid, bi = 0; q0 < nb; q0 += LU * TOPK_CSM_THREADS, ++bi) {
    PK pks[LU];
#pragma unroll
    for (int u = 0; u < LU; ++u)
      if (q0 + u * TOPK_CSM_THREADS < nb)
        pks[u] = seg_load<T, PACK, EF>(rbase + (i64)(q0 + u * TOPK_CSM_THREADS) * PACK, pol);
    C bmx = Num<C>::neg_inf();  // the batch's largest value
#pragma unroll
    for (int u = 0; u < LU; ++u) {
      const int q = q0 + u * TOPK_CSM_THREADS;
      if (q >= nb) break;
      PK pk = pks[u];
      const i64 c0 = c00 + (i64)q * PACK;
      csm_pad_edge<C>(pk, c0, L);
      chunk[q] = pk;
#else
  for (int pc = 0; pc < npc; ++pc) {
#if TOPK_CSM_BULK
    csm_mbar_wait(mbar + pc, 0u);
#endif
    // thread tid takes the piece's packs q = tid (mod TOPK_CSM_THREADS), as in every later pass
    const int qa = pc * pp, qb = min(nb, qa + pp);
    for (int q = qa + (tid - qa % TOPK_CSM_THREADS + TOPK_CSM_THREADS) % TOPK_CSM_THREADS; q < qb;
         q += TOPK_CSM_THREADS) {
      PK pk = chunk[q];
      const i64 c0 = c00 + (i64)q * PACK;
      if (csm_pad_edge<C>(pk, c0, L)) chunk[q] = pk;
#endif
      C v[PACK];
#pragma unroll
      for (int e = 0; e < PACK; ++e) v[e] = to_compute<C>(pk.v[e]);
      md_accumulate<C, PACK>(md, v);
      C v1 = v[0];
#pragma unroll
      for (int e = 1; e < PACK; ++e) v1 = Num<C>::max(v1, v[e]);
#if TOPK_CSM_LDG
      bmx = Num<C>::max(bmx, v1);
#endif
      if (v1 > bv) {  // a better value (padding is -inf: never here)
        int ef = PACK - 1;
#pragma unroll
        for (int e = PACK - 1; e >= 0; --e)
          if (v[e] == v1) ef = e;
        best = CT::make(v1, c0 + ef);
        bv = v1;
      } else if (CT::hi(best) == 0u) {  // nothing yet, or NaN / -inf so far: full keys
#pragma unroll
        for (int e = 0; e < PACK; ++e) {
          if (c0 + e >= 0 && c0 + e < L) {
            const K c = CT::make(v[e], c0 + e);
            if (CT::better(c, best)) best = c;
          }
        }
        if (CT::hi(best) != 0u) bv = CT::value(best);
      }
    }
#if TOPK_CSM_LDG
    if (bi < TOPK_CSM_BMAX_BATCHES) bmax[bi * TOPK_CSM_THREADS + tid] = csm_bmax_bits(bmx);
#endif
  }
#if TOPK_CSM_LDG
  if constexpr (CS > 1) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
  if (TOPK_CSM_STOP == 10) {
    __syncthreads();
    TOPK_CSM_STOP_AT(10, to_compute<C>(chunk[tid % max(nb, 1)].v[0]) == C(-7) || md.d == C(-3), false);
  }
#endif
  CSM_T(2);
#pragma unroll
  for (int o = GL / 2; o > 0; o >>= 1) {
    const K t = CT::shfl_xor(best, o);
    if (CT::better(t, best)) best = t;
  }
  // every block gets the row's group maxima; block 0 the (m, d) partials
  CSM_T(3);
  if (tid % GL == 0) {  // k = 1 needs the keys, tau only their value words
    if (k == 1) {
      csm_put_all<CS>(gkey, (int)(b * GB + tid / GL), best, xmb);
    } else {
      csm_put_all<CS>(gval, (int)(b * GB + tid / GL), CT::hi(best), xmb);
    }
  }
  md = warp_allreduce_md<C, 32>(md);
  if (lane == 0) red_md[tid >> 5] = md;
  __syncthreads();
  if (tid < 32) {  // warp 0: the block's (m, d) to block 0
    md = lane < TOPK_CSM_THREADS / 32 ? red_md[lane] : md_identity<C>();
    md = warp_allreduce_md<C, TOPK_CSM_THREADS / 32>(md);
    if (tid == 0) {
      if constexpr (CS > 1) {
        csm_st_async(cluster_map_shared(mdp + b, 0u), md, cluster_map_shared(xmb, 0u));
      } else {
        mdp[0] = md;
      }
    }
  }
  CSM_T(4);
  csm_xwait<CS>(xmb);  // every block's maxima here (block 0: and partials)
  CSM_T(5);
  if (k == 1) {  // the row's best is the best group maximum
    if (b != 0) return;
    if (tid < 32) {
      K c = gkey[tid];
#pragma unroll
      for (int j = 1; j < G / 32; ++j)
        if (CT::better(gkey[tid + 32 * j], c)) c = gkey[tid + 32 * j];
      c = warp_best<CT>(c);
      if (tid == 0) {
        md = mdp[0];
#pragma unroll
        for (int j = 1; j < CS; ++j) md = md_merge(md, mdp[j]);
        const C sc = log ? Num<C>::log(md.d) : Num<C>::rcp(md.d);
        const C xv = CT::value(c);
        idx[r] = CT::index(c);
        topk_store<C>(vals, r, log ? (xv - md.m) - sc : Num<C>::exp(xv - md.m) * sc, out_code);
      }
    }
    CSM_T(10);
    return;
  }

  // ---- 2. tau: the k-th largest group-maximum value -------------------------
  // = the smallest value word with fewer than k maxima above it. tau = (value
  // word, 0) takes every key of that value. k <= TOPK_CSM_COARSE_K: of the
  // G / 4 maxima of four groups each (warp 0 alone, a maximum a lane, by
  // shuffles; a lower, still valid bound: at least k distinct elements are
  // not below it). Else TOPK_CSM_TAU_PARTS threads a key, G / TAU_PARTS
  // comparisons of value words each, read four at a time, staggered so the
  // parts read distinct banks; a warp minimum, then one shared atomic a warp.
  if (k <= TOPK_CSM_COARSE_K) {
    if (tid < 32) {
      static_assert(G == 128, "a coarse maximum a lane");
      const uint4 g = reinterpret_cast<const uint4*>(gval)[lane];
      const unsigned ch = max(max(g.x, g.y), max(g.z, g.w));
      int gt = 0;
#pragma unroll
      for (int j = 0; j < 32; ++j) gt += __shfl_sync(0xffffffffu, ch, j) > ch ? 1 : 0;
      const unsigned cand_hi = __reduce_min_sync(0xffffffffu, gt < k ? ch : 0xffffffffu);
      if (lane == 0) s_tau_hi = cand_hi;
    }
  } else if (tid < G * TOPK_CSM_TAU_PARTS) {
    constexpr int TP = TOPK_CSM_TAU_PARTS, NQ = G / 4 / TP;  // uint4 words a part reads
    static_assert(TP == 1 || TP == 2 || TP == 4, "threads a key");
    const int kid = tid / TP, part = tid % TP;
    const unsigned ch = gval[kid];
    const uint4* g4 = reinterpret_cast<const uint4*>(gval) + part * NQ;
    int gt = 0, gt2 = 0;
#pragma unroll
    for (int i = 0; i < NQ; ++i) {
      const uint4 w = g4[(i + 2 * part) % NQ];
      gt += (w.x > ch ? 1 : 0) + (w.y > ch ? 1 : 0);
      gt2 += (w.z > ch ? 1 : 0) + (w.w > ch ? 1 : 0);
    }
    gt += gt2;
#pragma unroll
    for (int o = 1; o < TP; o <<= 1) gt += __shfl_xor_sync(0xffffffffu, gt, o);
    const unsigned cand_hi = __reduce_min_sync(0xffffffffu, (part == 0 && gt < k) ? ch : 0xffffffffu);
    if (lane == 0 && cand_hi != 0xffffffffu) atomicMin(&s_tau_hi, cand_hi);
  }
  __syncthreads();
  CSM_T(6);
  K tau = (K)s_tau_hi << 32;

  // ---- 3. candidates into block 0's slots; every block gets every count ------
  // (block 0 counts the slot keys on the counts' mbarrier: each block fills
  // its unused slots with empty keys, so block 0 knows the bytes from the
  // start and waits once)
  if constexpr (CS > 1) {
    csm_filter<T, PACK, true>(chunk, nb, c00, L, tau, s_cnt, nullptr, cluster_map_shared(cand + b * SLOT, 0u),
                              cluster_map_shared(xmb + 1, 0u), SLOT, TOPK_CSM_LDG && TOPK_CSM_BMAX ? bmax : nullptr);
  } else {
    csm_filter<T, PACK, false>(chunk, nb, c00, L, tau, s_cnt, cand, 0u, 0u, SLOT, TOPK_CSM_LDG && TOPK_CSM_BMAX ? bmax : nullptr);
  }
  __syncthreads();
  CSM_T(7);
  if (tid == 0) csm_put_all<CS>(&cnts[0][0], (int)b, s_cnt[0], xmb + 1);
  if constexpr (CS > 1) {
    if (tid < SLOT && (unsigned)tid >= s_cnt[0])
      csm_st_async(cluster_map_shared(cand + b * SLOT + tid, 0u), CT::empty(), cluster_map_shared(xmb + 1, 0u));
  }
  if (b == 0) {  // block 0, while the counts arrive: the row's (m, d) (partials here since the first exchange)
    md = lane < CS ? mdp[lane] : md_identity<C>();  // every warp, by shuffles
    md = warp_allreduce_md<C, CS>(md);
    md.m = __shfl_sync(0xffffffffu, md.m, 0);
    md.d = __shfl_sync(0xffffffffu, md.d, 0);
  }
  csm_xwait<CS>(xmb + 1);  // every block's count here (block 0: and every slot)
  CSM_T(8);
  unsigned n = 0u;
  bool over = false;
#pragma unroll
  for (int j = 0; j < CS; ++j) {
    n += cnts[0][j];
    over = over || cnts[0][j] > (unsigned)SLOT;
  }

  if (over || n > TOPK_CSM_CAP) {
    // ---- 4b. radix selection of a tighter tau --------------------------------
    if (b == 0)
      for (int i = tid; i < 8 * 256; i += TOPK_CSM_THREADS) (&ghist[0][0])[i] = 0u;
    csm_sync<CS>();  // block 0's histograms zeroed before anyone adds
    K prefix = 0ull, pmask = 0ull;
    unsigned above = 0u;  // keys better than every key with this prefix
    for (int rd = 0; rd < 8; ++rd) {
      const int sh = 56 - 8 * rd;
      for (int i = tid; i < 256; i += TOPK_CSM_THREADS) hist[i] = 0u;
      __syncthreads();
      // whole warps run the loop so a digit's count is added once a warp
      for (int q0 = tid - lane; q0 < nb; q0 += TOPK_CSM_THREADS) {
        const int q = q0 + lane;
        PK pk;
        if (q < nb) pk = chunk[q];
        const i64 c0 = c00 + (i64)q * PACK;
#pragma unroll
        for (int e = 0; e < PACK; ++e) {
          int d = 256;
          if (q < nb && c0 + e >= 0 && c0 + e < L) {
            const K c = CT::make(to_compute<C>(pk.v[e]), c0 + e);
            if ((c & pmask) == prefix) d = (int)((c >> sh) & 255u);
          }
          const unsigned same = __match_any_sync(0xffffffffu, d);
          if (d < 256 && lane == __ffs(same) - 1) atomicAdd(&hist[d], (unsigned)__popc(same));
        }
      }
      __syncthreads();
      unsigned* g0 = csm_rank<CS>(&ghist[rd][0], 0u);
      for (int i = tid; i < 256; i += TOPK_CSM_THREADS)
        if (hist[i]) atomicAdd(g0 + i, hist[i]);
      csm_sync<CS>();
      for (int i = tid; i < 256; i += TOPK_CSM_THREADS) hist[i] = *reinterpret_cast<volatile unsigned*>(g0 + i);
      __syncthreads();
      if (tid < 32) {  // the digit holding the (k - above)-th best: lane l sums digits 255 - 8l .. 248 - 8l
        unsigned h[8], sum = 0u;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          h[j] = hist[255 - 8 * lane - j];
          sum += h[j];
        }
        unsigned inc = sum;  // inclusive prefix over lanes (better digits first)
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
          const unsigned t = __shfl_up_sync(0xffffffffu, inc, o);
          if (lane >= o) inc += t;
        }
        const unsigned need = (unsigned)k - above;
        const unsigned before = inc - sum;
        if (before < need && inc >= need) {
          unsigned acc = before;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            if (acc < need && acc + h[j] >= need) {
              s_dig = 255 - 8 * lane - j;
              s_above = acc;
            }
            acc += h[j];
          }
        }
      }
      __syncthreads();
      const int dig = s_dig;
      above += s_above;
      const unsigned inb = hist[dig];
      prefix |= (K)dig << sh;
      pmask |= (K)255u << sh;
      __syncthreads();  // hist is zeroed next round
      if (above + inb <= TOPK_CSM_CAP) break;  // block-uniform
    }
    // keys >= prefix: between k and TOPK_CSM_CAP of them; count, exchange
    // counts, then write each block's at its offset of cand2
    tau = prefix;
    csm_filter<T, PACK, false>(chunk, nb, c00, L, tau, s_cnt + 1, nullptr, 0u, 0u, 0u);
    __syncthreads();
    if (tid == 0)
      for (int j = 0; j < CS; ++j) csm_rank<CS>(&cnts[1][0], (unsigned)j)[b] = s_cnt[1];
    csm_sync<CS>();
    unsigned off = 0u;
    n = 0u;
#pragma unroll
    for (int j = 0; j < CS; ++j) {
      off += j < (int)b ? cnts[1][j] : 0u;
      n += cnts[1][j];
    }
    csm_filter<T, PACK, false>(chunk, nb, c00, L, tau, s_cnt + 2, csm_rank<CS>(cand2, 0u) + off, 0u, 0u,
                               cnts[1][b]);
    csm_sync<CS>();
  }
  if (b != 0) return;
  // ---- 4. block 0: output position = rank among the candidates --------------
  CSM_T(9);
  if (TOPK_CSM_FAST_RANK && !(over || n > TOPK_CSM_CAP) && n <= 32u * TOPK_CSM_FAST_PER_LANE) {
    // typical rows (a little over k candidates): nw <= TOPK_CSM_FAST_WARPS
    // warps, in few instructions (this code runs once, cold). Lane l of each
    // takes candidates l, l + 32, ... (block order through the slots); warp
    // 0 copies them contiguous, padded to groups of 8; warp w counts the
    // better ones in its share of the groups (broadcast loads); the shares
    // meet in shared memory and warp 0 writes.
    const int nn = (int)n, n8 = (nn + 7) & ~7, nch = n8 >> 3;
    const int nw = min(TOPK_CSM_FAST_WARPS, nch), w = tid >> 5;
    if (w >= nw) return;
    const C sc = log ? Num<C>::log(md.d) : Num<C>::rcp(md.d);
    K c[TOPK_CSM_FAST_PER_LANE];
#pragma unroll
    for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u) c[u] = CT::empty();
    unsigned off = 0u;
#pragma unroll
    for (int j = 0; j < CS; ++j) {
      const unsigned cj = cnts[0][j];
#pragma unroll
      for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u) {
        const unsigned i = (unsigned)(lane + 32 * u) - off;
        if (i < cj) c[u] = cand[j * SLOT + i];
      }
      off += cj;
    }
    if (w == 0) {
#pragma unroll
      for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u)
        if (lane + 32 * u < n8) cand2[lane + 32 * u] = c[u];  // (empty keys better than none)
    }
    if (nw > 1) {
      asm volatile("bar.sync 1, %0;" ::"r"(nw * 32) : "memory");
    } else {
      __syncwarp();
    }
    CSM_T(11);
    int rank[TOPK_CSM_FAST_PER_LANE];
#pragma unroll
    for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u) rank[u] = 0;
    const ulonglong2* c2 = reinterpret_cast<const ulonglong2*>(cand2);
    for (int g = nch * w / nw; g < nch * (w + 1) / nw; ++g) {  // 8 keys: 4 broadcast loads, then compare
      ulonglong2 o[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) o[t] = c2[4 * g + t];
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u)
          rank[u] += (CT::better(o[t].x, c[u]) ? 1 : 0) + (CT::better(o[t].y, c[u]) ? 1 : 0);
    }
    if (nw > 1) {
      if (w > 0) {
#pragma unroll
        for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u) fast_rank[w - 1][lane + 32 * u] = rank[u];
      }
      asm volatile("bar.sync 1, %0;" ::"r"(nw * 32) : "memory");
      if (w > 0) return;
      for (int v = 1; v < nw; ++v)
#pragma unroll
        for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u) rank[u] += fast_rank[v - 1][lane + 32 * u];
    }
    CSM_T(12);
    CSM_TV(13, n);
#pragma unroll
    for (int u = 0; u < TOPK_CSM_FAST_PER_LANE; ++u) {
      if (lane + 32 * u < nn && rank[u] < k) {
        idx[r * k + rank[u]] = CT::index(c[u]);
        const C xv = CT::value(c[u]);
        topk_store<C>(vals, r * k + rank[u], log ? (xv - md.m) - sc : Num<C>::exp(xv - md.m) * sc, out_code);
      }
    }
    CSM_T(10);
    return;
  }
  if (!(over || n > TOPK_CSM_CAP)) {  // block 0: the slots' candidates made contiguous
    for (int i = tid; i < CS * SLOT; i += TOPK_CSM_THREADS) {
      const int bb = i / SLOT, j = i - bb * SLOT;
      if (j < (int)cnts[0][bb]) {
        int off = 0;
        for (int t = 0; t < bb; ++t) off += (int)cnts[0][t];
        cand2[off + j] = cand[i];
      }
    }
    __syncthreads();
  }

  const C sc = log ? Num<C>::log(md.d) : Num<C>::rcp(md.d);
  // tpc threads a candidate (n <= TOPK_CSM_CAP <= TOPK_CSM_THREADS: one pass)
  int tpc = 1;
  while (tpc < 32 && (int)n * tpc * 2 <= TOPK_CSM_THREADS) tpc *= 2;
  const int ci = tid / tpc, part = tid % tpc;
  K c = CT::empty();
  int rank = 0;
  if (ci < (int)n) {
    c = cand2[ci];
    for (int j = part; j < (int)n; j += tpc) rank += CT::better(cand2[j], c) ? 1 : 0;
  }
  for (int o = 1; o < tpc; o <<= 1) rank += __shfl_xor_sync(0xffffffffu, rank, o);
  if (ci < (int)n && part == 0 && rank < k) {
    idx[r * k + rank] = CT::index(c);
    const C xv = CT::value(c);
    const C y = log ? (xv - md.m) - sc : Num<C>::exp(xv - md.m) * sc;
    topk_store<C>(vals, r * k + rank, y, out_code);
  }
#ifdef TOPK_CSM_TRACE
  __syncthreads();
#endif
  CSM_T(10);
}

// ----------------------------------------------------------------------------
// topk_merge: one block per row (blocks stride over rows). Dynamic shared
// memory: splits x KP candidates.
// ----------------------------------------------------------------------------
template <typename C, int MODE>
__global__ void __launch_bounds__(TOPK_MAX_THREADS)
topk_merge(const typename Cand<C>::type* __restrict__ wsk, const C* __restrict__ wsm,
           void* __restrict__ vals, i64* __restrict__ idx, i64 rows, i64 k, i64 kp, i64 splits,
           i64 out_code, i64 log) {
  typedef Cand<C> CT;
  typedef typename CT::type K;
  extern __shared__ __align__(16) unsigned char topk_smem[];
  __shared__ MD<C> red_md[32];
  K* lists = reinterpret_cast<K*>(topk_smem);
  const int KP = (int)kp, n = (int)splits * KP;
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const K* src = wsk + r * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) lists[i] = src[i];
    MD<C> md = md_identity<C>();
    if (MODE != TOPK_SELECT) {
      for (i64 j = threadIdx.x; j < splits; j += blockDim.x) {
        MD<C> o;
        o.m = wsm[2 * (r * splits + j)];
        o.d = wsm[2 * (r * splits + j) + 1];
        md = md_merge(md, o);
      }
      md = topk_block_md<C>(md, red_md);  // its barriers also publish lists[]
    } else {
      __syncthreads();
    }
    block_tree_merge<CT>(lists, (int)splits, KP, KP);
    topk_write<C, MODE>(lists, md, vals, idx, r, k, out_code, log);
    __syncthreads();
  }
}

// ----------------------------------------------------------------------------
// Helpers of the unfused and sort paths (rows x k outputs, row-major).
// ----------------------------------------------------------------------------
template <typename U>
__global__ void topk_gather(const U* __restrict__ y, const i64* __restrict__ idx, U* __restrict__ vals,
                            i64 rows, i64 L, i64 k) {
  const i64 n = rows * k;
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (i64)gridDim.x * blockDim.x)
    vals[t] = y[(t / k) * L + idx[t]];
}

// keys[r, c] = ~(ranking key of x[r, c]): ascending order of keys, ties by
// index (a stable sort), is the top-k order (NaN last).
template <typename T, typename C>
__global__ void topk_sort_keys(const T* __restrict__ x, typename Cand<C>::key_t* __restrict__ keys,
                               i64 rows, i64 L, i64 sx) {
  const i64 n = rows * L;
  for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (i64)gridDim.x * blockDim.x) {
    const i64 r = t / L, c = t - r * L;
    keys[t] = ~Cand<C>::key(to_compute<C>(x[r * sx + c]));
  }
}
