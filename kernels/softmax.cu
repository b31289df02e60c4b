// cusoftmax/kernels/softmax.cu -- forward softmax and log-softmax.
//
// Kernels (the dispatcher in cusoftmax/_dispatch.py picks one per call):
//   softmax_warp     short rows: a group of LANES lanes per row, row in registers.
//   softmax_block    medium rows: one block per row, row in registers.
//   softmax_cluster  long rows (sm_90+): a cluster of CLUSTER blocks per row, row
//                    in registers, block partials exchanged through distributed
//                    shared memory. One read of x, one write of y.
//   softmax_stream   rows too long to keep on chip, and the paper's streaming
//                    forms: ALGO = NAIVE (Algorithm 1), SAFE (Algorithm 2),
//                    ONLINE (Algorithm 3). One block per row.
//   softmax_rowsync  few long rows, one launch: each row split across blocks
//                    (at most one per SM) that hold it in registers and meet at
//                    a per-row barrier to merge their (max, sum) partials.
//   softmax_split_partial + softmax_split_finish
//                    few long rows: each row split across SPLITS blocks; per-block
//                    (max, sum) partials go to a workspace, the second kernel
//                    merges them and normalises its slice (re-read from L2).
//   softmax_cols     reduction along a strided axis with a unit-stride inner
//                    axis (non-last axis, Fortran order): lanes run along the
//                    inner axis so every access is coalesced.
//   softmax_cols_staged  the same layout, axes too long for registers: each
//                    thread keeps its VEC-wide packs in shared memory (one read
//                    of x, one write of y).
//   softmax_cols_split_partial + softmax_cols_split_finish
//                    the same layout, long axes: the axis split over blocks,
//                    per-column (max, sum) partials in a workspace, then a
//                    second pass (reversed, re-reading from L2) that writes y.
//   softmax_cols_wide_partial + _merge + _finish
//                    the same layout, large 16-bit slabs of long rows off
//                    the 16-byte grid: blocks own chunks of whole rows (one
//                    contiguous range each), per-column partials, their
//                    merge, then a second pass.
//   softmax_cols_sync  the same layout in one launch: the axis split over
//                    co-resident blocks that hold their rows in registers and
//                    meet at a per-tile barrier (one read of x, one write of y);
//                    FOLD / SK: rows off the 16-byte grid read folded (rows
//                    of whole packs) or on each row's own grid (skewed).
//   softmax_cols_cl  the same layout (sm_90), a tile's axis within one
//                    cluster's registers: the cluster's blocks exchange their
//                    per-column partials through distributed shared memory
//                    (st.async, mbarriers); no grid barrier, no workspace.
//   softmax_cols_slab  the same layout, one dense slab held whole on chip: a
//                    cooperative grid reads it as contiguous 16-byte packs,
//                    folding them into per-column partials, merges those
//                    across two grid barriers and writes it back (one read,
//                    one write, both contiguous).
// Every kernel takes T (input storage), U (output storage) and LOG (log-softmax);
// arithmetic is in C = float, or double when either side is double.
#include "common.cuh"

enum { ALGO_NAIVE = 0, ALGO_SAFE = 1, ALGO_ONLINE = 2 };

template <typename T, typename U> struct ComputeOf2 {
  typedef typename ComputeOf<T>::type CT;
  typedef typename ComputeOf<U>::type CU;
  typedef typename ComputeOf<double>::type D;
  // double if either side is double, else float
  typedef typename ComputeOf<decltype(CT() + CU())>::type type;
};

// Output of an element kept in registers: softmax keeps e^(x - m_t) and
// multiplies by the thread's scale; log-softmax keeps x: (x - M) - log D.
template <typename C, bool LOG> CSM_DEVICE C kept_value(C v, C m, C s) {
  return LOG ? (v - m) - s : v * s;
}

// Keep exponentials in registers (one exp per element) only for small
// per-thread footprints: measured on H100, the extra live registers cost more
// occupancy than the saved exp is worth beyond 16 values or 512 threads.
template <typename C, bool LOG, int THREADS, int NV> __host__ __device__ constexpr bool keep_exp() {
  return !LOG && THREADS <= 512 && NV <= 16 && sizeof(C) == 4;
}

// ---------------------------------------------------------------------------
// softmax_warp: LANES consecutive lanes own one row; each lane holds NP packs of
// PACK elements (lane l of a group owns packs l, l + LANES, ...). A warp covers
// 32 / LANES rows at a time; warps stride over the rows.
// ---------------------------------------------------------------------------
template <typename T, typename U, bool LOG, int PACK, int NP, int LANES>
__global__ void __launch_bounds__(128)
softmax_warp(const T* __restrict__ x, U* __restrict__ y, i64 rows, i64 L, i64 sx, i64 sy) {
  typedef typename ComputeOf2<T, U>::type C;
  constexpr int RPW = 32 / LANES;  // rows per warp
  const int lane = threadIdx.x & 31;
  const int g = lane / LANES, lg = lane % LANES;
  const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
  for (i64 r0 = warp * RPW; r0 < rows; r0 += nwarps * RPW) {
    const i64 r = r0 + g;
    const bool active = r < rows;
    C v[NP * PACK];
    int mis = 0;
    if (active) {
      const T* row = x + r * sx;
      mis = row_misalignment<T, PACK>(row);
#pragma unroll
      for (int i = 0; i < NP; ++i)
        load_row_pack<C, T, PACK>(row, (i64)i * LANES + lg, mis, L, Num<C>::neg_inf(), v + i * PACK);
    } else {
#pragma unroll
      for (int i = 0; i < NP * PACK; ++i) v[i] = Num<C>::neg_inf();
    }
    MD<C> md = LOG ? md_of_values<C, NP * PACK>(v) : md_exp_inplace<C, NP * PACK>(v);
    const C m_t = md.m;
    md = warp_allreduce_md<C, LANES>(md);
    if (active) {
      const C s = LOG ? row_scale<C, LOG>(md) : thread_scale<C>(m_t, md);
      U* orow = y + r * sy;
#pragma unroll
      for (int i = 0; i < NP; ++i) {
        C o[PACK];
#pragma unroll
        for (int e = 0; e < PACK; ++e) o[e] = kept_value<C, LOG>(v[i * PACK + e], md.m, s);
        store_row_pack<U, C, PACK>(orow, (i64)i * LANES + lg, mis, L, o);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// softmax_block: one block per row (blocks stride over rows); thread t owns
// packs t, t + THREADS, ..., NP of them, in registers.
// ---------------------------------------------------------------------------
template <typename T, typename U, bool LOG, int PACK, int NP, int THREADS>
__global__ void __launch_bounds__(THREADS)
softmax_block(const T* __restrict__ x, U* __restrict__ y, i64 rows, i64 L, i64 sx, i64 sy) {
  typedef typename ComputeOf2<T, U>::type C;
  constexpr bool KEEP = keep_exp<C, LOG, THREADS, NP * PACK>();
  __shared__ MD<C> red[THREADS / 32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * sx;
    const int mis = row_misalignment<T, PACK>(row);
    C v[NP * PACK];
#pragma unroll
    for (int i = 0; i < NP; ++i)
      load_row_pack<C, T, PACK>(row, (i64)i * THREADS + threadIdx.x, mis, L, Num<C>::neg_inf(), v + i * PACK);
    MD<C> md = KEEP ? md_exp_inplace<C, NP * PACK>(v) : md_of_values<C, NP * PACK>(v);
    const C m_t = md.m;
    md = block_allreduce_md<C, THREADS>(md, red);
    const C s = KEEP ? thread_scale<C>(m_t, md) : row_scale<C, LOG>(md);
    U* orow = y + r * sy;
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      C o[PACK];
#pragma unroll
      for (int e = 0; e < PACK; ++e)
        o[e] = KEEP ? v[i * PACK + e] * s : finish_value<C, LOG>(v[i * PACK + e], md.m, s);
      store_row_pack<U, C, PACK>(orow, (i64)i * THREADS + threadIdx.x, mis, L, o);
    }
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---------------------------------------------------------------------------
// softmax_cluster: a cluster of CLUSTER blocks per row (clusters stride over
// rows). Block `rank` owns packs [rank * NP * THREADS, (rank + 1) * NP * THREADS)
// of the row, in registers. Each block reduces its (max, sum), publishes it in
// its shared memory, and after a cluster barrier every warp merges the CLUSTER
// partials read through distributed shared memory.
// ---------------------------------------------------------------------------
template <typename T, typename U, bool LOG, int PACK, int NP, int THREADS, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
softmax_cluster(const T* __restrict__ x, U* __restrict__ y, i64 rows, i64 L, i64 sx, i64 sy) {
  typedef typename ComputeOf2<T, U>::type C;
  constexpr bool KEEP = keep_exp<C, LOG, THREADS, NP * PACK>();
  __shared__ MD<C> red[THREADS / 32];
  __shared__ C part[2];
  const unsigned rank = cluster_ctarank();
  const i64 cid = blockIdx.x / CLUSTER, nclusters = gridDim.x / CLUSTER;
  const i64 base = (i64)rank * NP * THREADS;
  const int lane = threadIdx.x & 31;
  for (i64 r = cid; r < rows; r += nclusters) {
    const T* row = x + r * sx;
    const int mis = row_misalignment<T, PACK>(row);
    C v[NP * PACK];
#pragma unroll
    for (int i = 0; i < NP; ++i)
      load_row_pack<C, T, PACK>(row, base + (i64)i * THREADS + threadIdx.x, mis, L, Num<C>::neg_inf(), v + i * PACK);
    MD<C> md = KEEP ? md_exp_inplace<C, NP * PACK>(v) : md_of_values<C, NP * PACK>(v);
    const C m_t = md.m;
    md = block_allreduce_md<C, THREADS>(md, red);
    if (threadIdx.x == 0) {
      part[0] = md.m;
      part[1] = md.d;
    }
    cluster_sync();  // partials visible cluster-wide
    MD<C> tot = md_identity<C>();
    if (lane < CLUSTER) {
      const unsigned a = cluster_map_shared(part, (unsigned)lane);
      tot.m = ld_shared_cluster(a, C());
      tot.d = ld_shared_cluster(a + sizeof(C), C());
    }
    tot = warp_allreduce_md<C, 32>(tot);
    cluster_sync();  // every block has read the partials before they change or exit
    const C s = KEEP ? thread_scale<C>(m_t, tot) : row_scale<C, LOG>(tot);
    U* orow = y + r * sy;
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      C o[PACK];
#pragma unroll
      for (int e = 0; e < PACK; ++e)
        o[e] = KEEP ? v[i * PACK + e] * s : finish_value<C, LOG>(v[i * PACK + e], tot.m, s);
      store_row_pack<U, C, PACK>(orow, base + (i64)i * THREADS + threadIdx.x, mis, L, o);
    }
  }
}
#endif

// ---------------------------------------------------------------------------
// softmax_rowsync: few long rows in a single launch. Grid (SPLITS, rows):
// block s of row r holds packs [s * NP * THREADS, (s + 1) * NP * THREADS) of
// the row in registers, publishes its (max, sum) partial in the workspace,
// waits at a barrier of the row's SPLITS blocks (all co-resident: the
// dispatcher launches at most one block per SM), merges the SPLITS partials
// (same order in every block: identical totals) and writes its slice. One
// read of x, one write of y, one launch (the two-kernel split regime pays a
// second launch and an L2 re-read).
// Workspace `ws` (zeroed once; every launch leaves its counters at zero):
// 2 x ROWSYNC_MAX_ROWS counters, then rows * SPLITS partials (m, d). The
// counters' region does not depend on rows: the partials a launch leaves
// behind must never lie where a later launch with more rows keeps a counter
// (with a region of 8 * rows bytes rounded to 256, a launch of 1 row left
// partials at byte 256, where a later 33-row launch counted row 32, whose
// blocks then passed the barrier on that stale count and read partials not
// yet written). The dispatcher sends at most ROWSYNC_MAX_ROWS rows
// (_dispatch.ROWSYNC_MAX_ROWS, the same value).
// ---------------------------------------------------------------------------
#define ROWSYNC_MAX_ROWS 1024
constexpr i64 ROWSYNC_COUNTER_BYTES = 8 * ROWSYNC_MAX_ROWS;

template <typename T, typename U, bool LOG, int PACK, int NP, int THREADS>
__global__ void __launch_bounds__(THREADS)
softmax_rowsync(const T* __restrict__ x, U* __restrict__ y, i64 rows, i64 L, i64 sx, i64 sy,
                unsigned char* __restrict__ ws) {
  typedef typename ComputeOf2<T, U>::type C;
  constexpr bool KEEP = keep_exp<C, LOG, THREADS, NP * PACK>();
  __shared__ MD<C> red[THREADS / 32];
  const i64 r = blockIdx.y;
  const unsigned sp = blockIdx.x, n = gridDim.x;
  unsigned* cnt = reinterpret_cast<unsigned*>(ws) + 2 * r;
  C* part = reinterpret_cast<C*>(ws + ROWSYNC_COUNTER_BYTES) + 2 * (r * n);
  const i64 base = (i64)sp * NP * THREADS;
  const T* row = x + r * sx;
  const int mis = row_misalignment<T, PACK>(row);
  C v[NP * PACK];
#pragma unroll
  for (int i = 0; i < NP; ++i)
    load_row_pack<C, T, PACK>(row, base + (i64)i * THREADS + threadIdx.x, mis, L, Num<C>::neg_inf(), v + i * PACK);
  MD<C> md = KEEP ? md_exp_inplace<C, NP * PACK>(v) : md_of_values<C, NP * PACK>(v);
  const C m_t = md.m;
  md = block_allreduce_md<C, THREADS>(md, red);
  if (threadIdx.x == 0) {
    part[2 * sp] = md.m;
    part[2 * sp + 1] = md.d;
    row_barrier_arrive(cnt, n);
  }
  __syncthreads();
  MD<C> tot = md_identity<C>();
  for (unsigned k = threadIdx.x; k < n; k += THREADS) {
    MD<C> o;
    o.m = __ldcg(part + 2 * k);
    o.d = __ldcg(part + 2 * k + 1);
    tot = md_merge(tot, o);
  }
  tot = block_allreduce_md<C, THREADS>(tot, red);  // ends with a barrier: all partials read
  if (threadIdx.x == 0) row_barrier_depart(cnt, n);
  const C s = KEEP ? thread_scale<C>(m_t, tot) : row_scale<C, LOG>(tot);
  U* orow = y + r * sy;
#pragma unroll
  for (int i = 0; i < NP; ++i) {
    C o[PACK];
#pragma unroll
    for (int e = 0; e < PACK; ++e)
      o[e] = KEEP ? v[i * PACK + e] * s : finish_value<C, LOG>(v[i * PACK + e], tot.m, s);
    store_row_pack<U, C, PACK>(orow, base + (i64)i * THREADS + threadIdx.x, mis, L, o);
  }
}

// ---------------------------------------------------------------------------
// softmax_smem: rows staged in shared memory, double-buffered with cp.async
// (16-byte LDGSTS), so the next row streams in while the current one is
// reduced and written: one read of x, one write of y, and the memory system
// never idles behind a reduction. A cluster of CLUSTER blocks shares a row
// (CLUSTER == 1: a block per row); block `rank` stages packs
// [rank * cpk, (rank + 1) * cpk) of it, cpk = packs per block (run time).
// Dynamic shared memory: STAGES * cpk * 16 bytes (STAGES - 1 rows in flight).
// Clusters stride over rows; the grid must not exceed the clusters that can
// be co-resident (the launcher asks the occupancy API). STAGES = 1, CLUSTER =
// 1 with launch bounds for MINB blocks an SM is the full-occupancy form: no
// row in flight ahead, but MINB resident blocks overlap one another's loads
// and reductions (grid up to one block a row).
// ---------------------------------------------------------------------------

template <typename T, int PACK, int THREADS>
CSM_DEVICE void smem_prefetch(Pack<T, PACK>* buf, const T* row, i64 pbeg, i64 pend, int mis) {
  for (i64 p = pbeg + threadIdx.x; p < pend; p += THREADS)
    cp_async16(buf + (p - pbeg), row + (p * PACK - mis));
}

template <typename T, typename U, bool LOG, int PACK, int THREADS, int CLUSTER, int STAGES, int MINB = 1>
__global__ void CSM_CLUSTER_DIMS(CLUSTER) __launch_bounds__(THREADS, MINB)
softmax_smem(const T* __restrict__ x, U* __restrict__ y, i64 rows, i64 L, i64 sx, i64 sy, i64 cpk) {
  typedef typename ComputeOf2<T, U>::type C;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Pack<T, PACK>* bufs = reinterpret_cast<Pack<T, PACK>*>(smem_raw);
  __shared__ MD<C> red[THREADS / 32];
  __shared__ C part[2][2];
  unsigned rank = 0;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  if (CLUSTER > 1) rank = cluster_ctarank();
#endif
  const i64 cid = blockIdx.x / CLUSTER, ncl = gridDim.x / CLUSTER;
  const i64 pbase = (i64)rank * cpk;
  auto span = [&](i64 r, i64& pb, i64& pe, int& mis) {
    const T* row = x + r * sx;
    mis = row_misalignment<T, PACK>(row);
    const i64 np = row_packs<PACK>(L, mis);
    pb = min(pbase, np);
    pe = min(pbase + cpk, np);
  };
  i64 r = cid;
  // prologue: rows r, r + ncl, ... into stages 0 .. STAGES-2
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    const i64 rp = r + st * ncl;
    if (rp < rows) {
      i64 pb, pe; int mis;
      span(rp, pb, pe, mis);
      smem_prefetch<T, PACK, THREADS>(bufs + st * cpk, x + rp * sx, pb, pe, mis);
    }
    cp_async_commit();
  }
  for (int it = 0; r < rows; ++it, r += ncl) {
    Pack<T, PACK>* cur = bufs + (it % STAGES) * cpk;
    const i64 rn = r + (STAGES - 1) * ncl;  // refill the stage freed last iteration
    if (rn < rows) {
      i64 pb, pe; int mis;
      span(rn, pb, pe, mis);
      smem_prefetch<T, PACK, THREADS>(bufs + ((it + STAGES - 1) % STAGES) * cpk, x + rn * sx, pb, pe, mis);
    }
    cp_async_commit();
    cp_async_wait<STAGES - 1>();  // this row's group has landed
    __syncthreads();
    i64 pb, pe; int mis;
    span(r, pb, pe, mis);
    MD<C> md = md_identity<C>();
    for (i64 p = pb + threadIdx.x; p < pe; p += THREADS) {
      const Pack<T, PACK> pk = cur[p - pb];
      C v[PACK];
#pragma unroll
      for (int e = 0; e < PACK; ++e) {
        const i64 c = p * PACK - mis + e;
        v[e] = (c >= 0 && c < L) ? to_compute<C>(pk.v[e]) : Num<C>::neg_inf();
      }
      md = md_update<C, PACK>(md, v);
    }
    md = block_allreduce_md<C, THREADS>(md, red);
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    if (CLUSTER > 1) {
      if (threadIdx.x == 0) {
        part[it & 1][0] = md.m;
        part[it & 1][1] = md.d;
      }
      cluster_sync();  // partials of this row visible; slot it&1 is reused two rows later
      MD<C> tot = md_identity<C>();
      const int lane = threadIdx.x & 31;
      if (lane < CLUSTER) {
        const unsigned a = cluster_map_shared(&part[it & 1][0], (unsigned)lane);
        tot.m = ld_shared_cluster(a, C());
        tot.d = ld_shared_cluster(a + sizeof(C), C());
      }
      md = warp_allreduce_md<C, 32>(tot);
    }
#endif
    const C s = row_scale<C, LOG>(md);
    U* orow = y + r * sy;
    for (i64 p = pb + threadIdx.x; p < pe; p += THREADS) {
      const Pack<T, PACK> pk = cur[p - pb];
      C o[PACK];
#pragma unroll
      for (int e = 0; e < PACK; ++e) o[e] = finish_value<C, LOG>(to_compute<C>(pk.v[e]), md.m, s);
      store_row_pack<U, C, PACK>(orow, p, mis, L, o);
    }
    __syncthreads();  // everyone is done with `cur` before it is refilled
  }
  cp_async_wait<0>();
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  if (CLUSTER > 1) cluster_sync();  // no block exits while others may read its partials
#endif
}

// ---------------------------------------------------------------------------
// Streaming passes over packs [p_begin, p_end) of one row, by THREADS threads,
// UNROLL packs in flight per thread.
// ---------------------------------------------------------------------------
template <typename C, typename T, int PACK, int UNROLL, int THREADS>
CSM_DEVICE MD<C> stream_md(const T* row, i64 p_begin, i64 p_end, int mis, i64 L) {
  MD<C> acc = md_identity<C>();
  for (i64 p0 = p_begin + threadIdx.x; p0 < p_end; p0 += (i64)THREADS * UNROLL) {
    C v[UNROLL * PACK];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const i64 p = p0 + (i64)u * THREADS;
      if (p < p_end) {
        load_row_pack<C, T, PACK>(row, p, mis, L, Num<C>::neg_inf(), v + u * PACK);
      } else {
#pragma unroll
        for (int e = 0; e < PACK; ++e) v[u * PACK + e] = Num<C>::neg_inf();
      }
    }
    acc = md_update<C, UNROLL * PACK>(acc, v);
  }
  return acc;
}

// Pass that applies op(v[], n) to every loaded group (max or naive/safe sums).
template <typename C, typename T, int PACK, int UNROLL, int THREADS, typename Op>
CSM_DEVICE void stream_pass(const T* row, i64 p_begin, i64 p_end, int mis, i64 L, C fill, Op& op) {
  for (i64 p0 = p_begin + threadIdx.x; p0 < p_end; p0 += (i64)THREADS * UNROLL) {
    C v[UNROLL * PACK];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const i64 p = p0 + (i64)u * THREADS;
      if (p < p_end) {
        load_row_pack<C, T, PACK>(row, p, mis, L, fill, v + u * PACK);
      } else {
#pragma unroll
        for (int e = 0; e < PACK; ++e) v[u * PACK + e] = fill;
      }
    }
#pragma unroll
    for (int i = 0; i < UNROLL * PACK; ++i) op(v[i]);
  }
}

template <typename C> struct MaxOp {  // max that keeps a NaN (fmax would drop it)
  C m;
  CSM_DEVICE void operator()(C v) { m = Num<C>::max_nan(m, v); }
};
template <typename C> struct SumExpOp {  // sum e^(v - m); m = 0 gives the naive sum
  C m, s;
  CSM_DEVICE void operator()(C v) { s += Num<C>::exp(v - m); }
};

// Write pass: y = finish(x) for packs [p_begin, p_end).
template <typename C, typename T, typename U, bool LOG, int PACK, int UNROLL, int THREADS>
CSM_DEVICE void stream_write(const T* row, U* orow, i64 p_begin, i64 p_end, int mis, i64 L, C m, C s) {
  for (i64 p0 = p_begin + threadIdx.x; p0 < p_end; p0 += (i64)THREADS * UNROLL) {
    C v[UNROLL * PACK];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const i64 p = p0 + (i64)u * THREADS;
      if (p < p_end) load_row_pack<C, T, PACK>(row, p, mis, L, Num<C>::neg_inf(), v + u * PACK);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const i64 p = p0 + (i64)u * THREADS;
      if (p < p_end) {
        C o[PACK];
#pragma unroll
        for (int e = 0; e < PACK; ++e) o[e] = finish_value<C, LOG>(v[u * PACK + e], m, s);
        store_row_pack<U, C, PACK>(orow, p, mis, L, o);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// softmax_stream: one block per row (blocks stride over rows).
//   NAIVE:  d = sum e^x; y = e^x / d                   (read, read, write)
//   SAFE:   m = max x; d = sum e^(x-m); y = e^(x-m)/d  (read, read, read, write)
//   ONLINE: (m, d) in one pass; y = e^(x-m)/d          (read, read, write)
// ---------------------------------------------------------------------------
template <typename T, typename U, bool LOG, int ALGO, int PACK, int UNROLL, int THREADS>
__global__ void __launch_bounds__(THREADS)
softmax_stream(const T* __restrict__ x, U* __restrict__ y, i64 rows, i64 L, i64 sx, i64 sy) {
  typedef typename ComputeOf2<T, U>::type C;
  __shared__ MD<C> red[THREADS / 32];
  __shared__ C redc[THREADS / 32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * sx;
    const int mis = row_misalignment<T, PACK>(row);
    const i64 np = row_packs<PACK>(L, mis);
    MD<C> md;
    if (ALGO == ALGO_ONLINE) {
      md = stream_md<C, T, PACK, UNROLL, THREADS>(row, 0, np, mis, L);
      md = block_allreduce_md<C, THREADS>(md, red);
    } else if (ALGO == ALGO_SAFE) {
      MaxOp<C> mx{Num<C>::neg_inf()};
      stream_pass<C, T, PACK, UNROLL, THREADS>(row, 0, np, mis, L, Num<C>::neg_inf(), mx);
      md.m = block_allreduce_max<C, THREADS>(mx.m, redc);
      SumExpOp<C> se{md.m, C(0)};
      if (md.m != Num<C>::neg_inf())
        stream_pass<C, T, PACK, UNROLL, THREADS>(row, 0, np, mis, L, Num<C>::neg_inf(), se);
      md.d = block_allreduce_sum<C, THREADS>(se.s, redc);
    } else {  // NAIVE: no max subtraction (overflows for large x: documented)
      SumExpOp<C> se{C(0), C(0)};
      stream_pass<C, T, PACK, UNROLL, THREADS>(row, 0, np, mis, L, Num<C>::neg_inf(), se);
      md.m = C(0);
      md.d = block_allreduce_sum<C, THREADS>(se.s, redc);
    }
    const C s = row_scale<C, LOG>(md);
    stream_write<C, T, U, LOG, PACK, UNROLL, THREADS>(row, y + r * sy, 0, np, mis, L, md.m, s);
  }
}

// ---------------------------------------------------------------------------
// Few long rows: grid (splits, rows). Block (s, r) owns packs
// [s * pps, (s + 1) * pps) of row r. ws holds 2 * rows * splits values of C.
// ---------------------------------------------------------------------------
template <typename T, typename C, int PACK, int UNROLL, int THREADS>
__global__ void __launch_bounds__(THREADS)
softmax_split_partial(const T* __restrict__ x, C* __restrict__ ws, i64 rows, i64 L, i64 sx, i64 pps) {
  __shared__ MD<C> red[THREADS / 32];
  const i64 r = blockIdx.y, s = blockIdx.x, splits = gridDim.x;
  const T* row = x + r * sx;
  const int mis = row_misalignment<T, PACK>(row);
  const i64 np = row_packs<PACK>(L, mis);
  const i64 pb = s * pps, pe = min(np, pb + pps);
  MD<C> md = stream_md<C, T, PACK, UNROLL, THREADS>(row, pb, pe, mis, L);
  md = block_allreduce_md<C, THREADS>(md, red);
  if (threadIdx.x == 0) {
    ws[2 * (r * splits + s)] = md.m;
    ws[2 * (r * splits + s) + 1] = md.d;
  }
}

template <typename T, typename U, bool LOG, int PACK, int UNROLL, int THREADS>
__global__ void __launch_bounds__(THREADS)
softmax_split_finish(const T* __restrict__ x, U* __restrict__ y,
                     const typename ComputeOf2<T, U>::type* __restrict__ ws,
                     i64 rows, i64 L, i64 sx, i64 sy, i64 pps) {
  typedef typename ComputeOf2<T, U>::type C;
  __shared__ MD<C> red[THREADS / 32];
  const i64 r = blockIdx.y, s = blockIdx.x, splits = gridDim.x;
  MD<C> md = md_identity<C>();
  for (i64 k = threadIdx.x; k < splits; k += THREADS) {
    MD<C> o;
    o.m = ws[2 * (r * splits + k)];
    o.d = ws[2 * (r * splits + k) + 1];
    md = md_merge(md, o);
  }
  md = block_allreduce_md<C, THREADS>(md, red);
  const T* row = x + r * sx;
  const int mis = row_misalignment<T, PACK>(row);
  const i64 np = row_packs<PACK>(L, mis);
  const i64 pb = s * pps, pe = min(np, pb + pps);
  const C sc = row_scale<C, LOG>(md);
  stream_write<C, T, U, LOG, PACK, UNROLL, THREADS>(row, y + r * sy, pb, pe, mis, L, md.m, sc);
}

// ---------------------------------------------------------------------------
// softmax_cols: x viewed as (O, L, I), element (o, l, i) at o*sxo + l*sxl + i
// (unit inner stride; likewise y). A tile is one o and TX consecutive i
// (TX a power of two <= 32, chosen at run time); the block's THREADS / TX
// thread rows split the L axis. A thread holds up to CAP elements in registers
// (one read); longer axes stream twice (online (max, sum), then write).
// ---------------------------------------------------------------------------
template <typename T, typename U, bool LOG, int CAP, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
softmax_cols(const T* __restrict__ x, U* __restrict__ y, i64 O, i64 L, i64 I,
             i64 sxo, i64 sxl, i64 syo, i64 syl, int TX) {
  typedef typename ComputeOf2<T, U>::type C;
  constexpr int WARPS = THREADS / 32;
  __shared__ MD<C> red[WARPS * 32];
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = THREADS / TX;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 tiles_i = (I + TX - 1) / TX, tiles = O * tiles_i;
  const bool in_regs = L <= (i64)NY * CAP;
  for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
    const i64 o = t / tiles_i, i = (t % tiles_i) * TX + tx;
    const bool ok = i < I;
    const T* xc = x + o * sxo + (ok ? i : 0);
    U* yc = y + o * syo + (ok ? i : 0);
    C v[CAP];
    MD<C> md;
    if (in_regs) {
#pragma unroll
      for (int k = 0; k < CAP; ++k) {
        const i64 l = ly + (i64)k * NY;
        v[k] = (ok && l < L) ? to_compute<C>(xc[l * sxl]) : Num<C>::neg_inf();
      }
      md = md_of_values<C, CAP>(v);
    } else {
      md = md_identity<C>();
      for (i64 l0 = ly; l0 < L; l0 += (i64)NY * CAP) {
#pragma unroll
        for (int k = 0; k < CAP; ++k) {
          const i64 l = l0 + (i64)k * NY;
          v[k] = (ok && l < L) ? to_compute<C>(xc[l * sxl]) : Num<C>::neg_inf();
        }
        md = md_update<C, CAP>(md, v);
      }
    }
    // lanes of a warp with equal tx: xor over the lane bits above TX
    for (int off = TX; off < 32; off <<= 1) {
      MD<C> other;
      other.m = shfl_xor(md.m, off);
      other.d = shfl_xor(md.d, off);
      md = md_merge(md, other);
    }
    if (lane < TX) red[warp * 32 + lane] = md;
    __syncthreads();
    if (WARPS > 1) {
      md = md_identity<C>();
      for (int w = 0; w < WARPS; ++w) md = md_merge(md, red[w * 32 + tx]);
    }
    __syncthreads();
    const C s = row_scale<C, LOG>(md);
    if (ok) {
      if (in_regs) {
#pragma unroll
        for (int k = 0; k < CAP; ++k) {
          const i64 l = ly + (i64)k * NY;
          if (l < L) yc[l * syl] = from_compute<U>(finish_value<C, LOG>(v[k], md.m, s));
        }
      } else {
        for (i64 l = ly; l < L; l += NY)
          yc[l * syl] = from_compute<U>(finish_value<C, LOG>(to_compute<C>(xc[l * sxl]), md.m, s));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// softmax_cols_staged: the (O, L, I) layout of softmax_cols for axes too long
// to hold in registers. A tile is one o and W = TX * VEC consecutive i; a
// thread handles VEC-wide packs (16 bytes at most) along i for the rows
// l = ly, ly + NY, ... and parks them in dynamic shared memory, each thread in
// its own slots (slot l * TX + tx: a warp's accesses are contiguous, and no
// barrier is needed between parking and reading back). One read of x, one
// write of y. STAGES == 0: packs go through registers (any VEC); STAGES >= 1:
// cp.async copies them straight to shared memory (16-byte packs only), every
// load of the tile in flight at once, and with STAGES == 2 the next tile
// streams in while this one is reduced and written. On sm_90 a cluster of
// CLUSTER blocks can share a tile, block `rank` parking rows
// [rank * Lc, (rank + 1) * Lc) (Lc = ceil(L / CLUSTER)) and the blocks'
// (max, sum) partials merged through distributed shared memory; clusters
// stride over tiles. Shared memory: max(STAGES, 1) * Lc * W elements of T
// (W <= COLS_W_MAX). VEC > 1 needs I, every stride and both base pointers to
// be multiples of VEC elements.
// ---------------------------------------------------------------------------
#define COLS_W_MAX 64
// A thread's per-column (max, sum) over its nv (<= NR) held packs, into md
// (identity on entry), in two sweeps (the maxima, then the sum of exps), each
// converting as it goes: float16's form in the register-resident cols
// kernels (the one-sweep md_accumulate keeps a column's NR converted values
// live and spills at NR 16). CW: convert with to_compute_w.
template <typename C, typename T, int VEC, int NR, bool CW = false>
CSM_DEVICE void cols_md_two_sweeps(MD<C> (&md)[VEC], const Pack<T, VEC> (&v)[NR], int nv) {
#pragma unroll
  for (int u = 0; u < NR; ++u)
    if (u < nv) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) md[e].m = Num<C>::max(md[e].m, to_compute_as<CW, C>(v[u].v[e]));
    }
  C base[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) base[e] = md[e].m == Num<C>::neg_inf() ? C(0) : md[e].m;
#pragma unroll
  for (int u = 0; u < NR; ++u)
    if (u < nv) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) md[e].d += Num<C>::exp(to_compute_as<CW, C>(v[u].v[e]) - base[e]);
    }
}

// Fold the (max, sum) of a thread's VEC columns over the lanes of its warp
// with the same tx (xor over the lane bits above TX); lanes < TX then park
// the warp's column totals in red[warp * WMAX + lane * VEC + e]. The caller
// merges over the warps after a barrier. AT (softmax_cols_cl's SK form): the
// thread's element e is column c0 + e, parked only where bit e of `own` is set.
template <typename C, int VEC, int WMAX, bool AT = false>
CSM_DEVICE void cols_warp_fold(MD<C>* md, int TX, MD<C>* red, int c0 = 0, unsigned own = 0u) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    for (int off = TX; off < 32; off <<= 1) {
      MD<C> other;
      other.m = shfl_xor(md[e].m, off);
      other.d = shfl_xor(md[e].d, off);
      md[e] = md_merge(md[e], other);
    }
    if (lane < TX && (!AT || (own >> e & 1u))) red[warp * WMAX + (AT ? c0 : lane * VEC) + e] = md[e];
  }
}

template <typename T, typename U, bool LOG, int VEC, int THREADS, int STAGES, int CLUSTER>
__global__ void CSM_CLUSTER_DIMS(CLUSTER) __launch_bounds__(THREADS, 1)
softmax_cols_staged(const T* __restrict__ x, U* __restrict__ y, i64 O, i64 L, i64 I,
                    i64 sxo, i64 sxl, i64 syo, i64 syl, int TX) {
  typedef typename ComputeOf2<T, U>::type C;
  typedef Pack<T, VEC> P;
  static_assert(STAGES == 0 || sizeof(P) == 16, "cp.async moves 16-byte packs");
  constexpr int WARPS = THREADS / 32;
  constexpr int UNR = 4;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  P* park = reinterpret_cast<P*>(smem_raw);
  __shared__ MD<C> red[WARPS * COLS_W_MAX];
  __shared__ MD<C> cpart[2][COLS_W_MAX];  // this block's partials, for the cluster
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = THREADS / TX;
  unsigned rank = 0;
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  if (CLUSTER > 1) rank = cluster_ctarank();
#endif
  const i64 cid = blockIdx.x / CLUSTER, ncl = gridDim.x / CLUSTER;
  const i64 W = (i64)TX * VEC;
  const i64 tiles_i = (I + W - 1) / W, tiles = O * tiles_i;
  const i64 Lc = (L + CLUSTER - 1) / CLUSTER, lb = min((i64)rank * Lc, L), le = min(lb + Lc, L);
  const i64 stage_packs = Lc * TX;
  // cp.async the thread's packs of tile t into buffer `buf`
  auto issue = [&](i64 t, P* buf) {
    const i64 o = t / tiles_i, i = (t % tiles_i) * W + (i64)tx * VEC;
    if (i < I) {
      const T* xc = x + o * sxo + i;
      for (i64 l = lb + ly; l < le; l += NY) cp_async16(buf + (l - lb) * TX + tx, xc + l * sxl);
    }
  };
  if (STAGES == 2) {
    if (cid < tiles) issue(cid, park);
    cp_async_commit();
  }
  int it = 0;
  for (i64 t = cid; t < tiles; t += ncl, ++it) {
    const i64 o = t / tiles_i, i = (t % tiles_i) * W + (i64)tx * VEC;
    const bool ok = i < I;
    U* yc = y + o * syo + (ok ? i : 0);
    P* cur = park + (STAGES == 2 ? (it & 1) * stage_packs : 0);
    MD<C> md[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) md[e] = md_identity<C>();
    if (STAGES == 2) {
      const i64 tn = t + ncl;
      if (tn < tiles) issue(tn, park + ((it + 1) & 1) * stage_packs);
      cp_async_commit();
      cp_async_wait<1>();
    } else if (STAGES == 1) {
      issue(t, cur);
      cp_async_commit();
      cp_async_wait<0>();
    }
    if (ok) {
      const T* xc = x + o * sxo + i;
      for (i64 l0 = lb + ly; l0 < le; l0 += (i64)NY * UNR) {
        P p[UNR];
#pragma unroll
        for (int u = 0; u < UNR; ++u) {
          const i64 l = l0 + (i64)u * NY;
          if (l < le) p[u] = STAGES == 0 ? load_pack<T, VEC>(xc + l * sxl) : cur[(l - lb) * TX + tx];
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          C v[UNR];
#pragma unroll
          for (int u = 0; u < UNR; ++u)
            v[u] = (l0 + (i64)u * NY < le) ? to_compute<C>(p[u].v[e]) : Num<C>::neg_inf();
          md[e] = md_update<C, UNR>(md[e], v);
        }
        if (STAGES == 0) {
#pragma unroll
          for (int u = 0; u < UNR; ++u) {
            const i64 l = l0 + (i64)u * NY;
            if (l < le) cur[(l - lb) * TX + tx] = p[u];
          }
        }
      }
    }
    cols_warp_fold<C, VEC, COLS_W_MAX>(md, TX, red);
    __syncthreads();
    C s[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (WARPS > 1) {
        md[e] = md_identity<C>();
        for (int w = 0; w < WARPS; ++w) md[e] = md_merge(md[e], red[w * COLS_W_MAX + tx * VEC + e]);
      }
    }
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    if (CLUSTER > 1) {
      if (ly == 0) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) cpart[it & 1][tx * VEC + e] = md[e];
      }
      cluster_sync();  // partials visible; slot it & 1 is reused two tiles later
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        MD<C> tot = md_identity<C>();
        for (int r = 0; r < CLUSTER; ++r) {
          const unsigned a = cluster_map_shared(&cpart[it & 1][tx * VEC + e], (unsigned)r);
          MD<C> q;
          q.m = ld_shared_cluster(a, C());
          q.d = ld_shared_cluster(a + sizeof(C), C());
          tot = md_merge(tot, q);
        }
        md[e] = tot;
      }
    }
#endif
#pragma unroll
    for (int e = 0; e < VEC; ++e) s[e] = row_scale<C, LOG>(md[e]);
    __syncthreads();
    if (ok) {
      for (i64 l = lb + ly; l < le; l += NY) {
        const P p = cur[(l - lb) * TX + tx];
        C f[VEC];
#pragma unroll
        for (int e = 0; e < VEC; ++e) f[e] = finish_value<C, LOG>(to_compute<C>(p.v[e]), md[e].m, s[e]);
        Pack<U, VEC> q;
        convert_pack<U, C, VEC>(f, q);
        store_pack_cols<U, VEC>(yc + l * syl, q);
      }
    }
  }
  if (STAGES > 0) cp_async_wait<0>();
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  if (CLUSTER > 1) cluster_sync();  // no block exits while others may read its partials
#endif
}

// ---------------------------------------------------------------------------
// softmax_cols_split_partial + softmax_cols_split_finish: the (O, L, I) layout
// of softmax_cols for long axes, streamed twice with the axis split over
// blocks. A tile is one o and W = TX * VEC consecutive i (VEC-wide packs along
// i, 16 bytes at most); the grid is (tiles, splits) and block (t, s) owns rows
// [s * lps, min(L, (s + 1) * lps)) of tile t, its THREADS / TX thread rows
// striding over them, UNR rows a thread in flight. Every warp access is a run
// of TX * VEC * sizeof(T) contiguous bytes, and for narrow inner axes a
// block's rows are one contiguous stretch of memory.
// Workspace (C values): part[tiles][splits][W][2], then tot[tiles][W][2];
// `cnt`: `tiles` unsigned counters, zero on entry and left zero (the
// launcher's per-stream zeroed workspace). Each partial block writes its
// per-column (max, sum) to part; the last block of a tile to finish
// (counter) merges the tile's partials into tot (cols_merge_partials: a
// fixed order), so the merge is done once per tile, not once per block, and
// resets the counter. The finish kernel reads tot, re-reads its rows and
// writes y, its blocks in reverse order: those that
// start first re-read what the partial kernel read last, still in L2.
// VEC > 1 needs I, every stride and both base pointers to be multiples of VEC.
// FOLD (the finish kernel's flag): a dense slab (L, fI) whose fI is not a
// multiple of the pack runs as (L / f, fI * f) (rows of whole packs, as
// softmax_cols_sync's FOLD form); the partial kernel is unchanged, and the
// finish block merges, for each of its columns c, the totals of the f
// reshaped columns c % fI + j * fI (j < f, in that order: the f columns of an
// original column get identical totals) into shared memory. No co-residency
// is needed, so any slab size works.
// ---------------------------------------------------------------------------
#define COLS_SPLIT_W_MAX 256
// cols_merge_partials: registers a thread gives to the partials in flight
// (float: 2 a pair, double: 4); softmax_cols_split_partial's phase hook
// (1: no merge)
#ifndef COLS_SPLIT_MERGE_REGS
#define COLS_SPLIT_MERGE_REGS 16
#endif
#ifndef COLS_SPLIT_STOP
#define COLS_SPLIT_STOP 0
#endif
// softmax_cols_sync: phase hook of tools/prof_cols_sync.py (0: the whole
// kernel), and the tile barrier's poll interval (ns)
#ifndef COLS_SYNC_STOP
#define COLS_SYNC_STOP 0
#endif
#ifndef COLS_SYNC_POLL_NS
#define COLS_SYNC_POLL_NS 128
#endif
// (max, sum) of each of a thread's VEC columns merged over the block's thread
// rows: lanes of equal tx in a warp by shuffles, then the warps through `red`,
// by one thread per column: on return thread w < W = TX * VEC holds the total
// of column w (other threads: identity). Starts and ends with a barrier.
template <typename C, int VEC, int THREADS>
CSM_DEVICE MD<C> cols_block_reduce(MD<C>* md, int tx, int TX, MD<C>* red) {
  constexpr int WARPS = THREADS / 32;
  __syncthreads();  // red may still be read by an earlier reduction
  cols_warp_fold<C, VEC, COLS_SPLIT_W_MAX>(md, TX, red);
  __syncthreads();
  MD<C> r = md_identity<C>();
  if ((int)threadIdx.x < TX * VEC) {
    for (int w = 0; w < WARPS; ++w) r = md_merge(r, red[w * COLS_SPLIT_W_MAX + threadIdx.x]);
  }
  __syncthreads();
  return r;
}

// One (m, d) pair of C from L2 (written by other blocks: not through L1),
// as one 8- or 16-byte load.
template <typename C> CSM_DEVICE MD<C> ldcg_md(const C* p);
template <> CSM_DEVICE MD<float> ldcg_md<float>(const float* p) {
  const float2 v = __ldcg(reinterpret_cast<const float2*>(p));
  return MD<float>{v.x, v.y};
}
template <> CSM_DEVICE MD<double> ldcg_md<double>(const double* p) {
  const double2 v = __ldcg(reinterpret_cast<const double2*>(p));
  return MD<double>{v.x, v.y};
}

// The MB pairs q merged as a tree (q[0] + q[1], q[2] + q[3], ..., then pairs of
// those): the merge order of cols_merge_partials / cols_merge_fold.
template <typename C, int MB> CSM_DEVICE MD<C> md_tree(MD<C> (&q)[MB]) {
#pragma unroll
  for (int h = 1; h < MB; h <<= 1)
#pragma unroll
    for (int b = 0; b + h < MB; b += 2 * h) q[b] = md_merge(q[b], q[b + h]);
  return q[0];
}

// The end of both merges: each thread's running total `acc` (thread j: row
// j / W of column j % W) meets the other R - 1 rows of its column in `red`,
// in row order; thread w < W returns the total of column w. Barriers before
// (red may still be read by an earlier reduction) and after.
template <typename C> CSM_DEVICE MD<C> cols_merge_rows(MD<C> acc, int W, int R, MD<C>* red) {
  __syncthreads();
  red[threadIdx.x] = acc;
  __syncthreads();
  MD<C> tot = md_identity<C>();
  if ((int)threadIdx.x < W)
    for (int j = 0; j < R; ++j) tot = md_merge(tot, red[j * W + threadIdx.x]);
  __syncthreads();
  return tot;
}

// Merge n per-column partials part[k][W] (k < n, (m, d) pairs of W columns,
// W a power of two dividing THREADS; columns from wv on are not read) into
// column totals: thread j takes column j % W of splits j / W, j / W + R, ...
// (R = THREADS / W), so a
// warp's loads are consecutive pairs (coalesced: the partials of a tile are
// one contiguous run), MB of them in flight and merged as a tree before
// joining the thread's running total; the R rows then meet in `red` in row
// order. The order depends on n, W and THREADS only: every block merging the
// same partials gets identical totals. On return thread w < W holds the
// total of column w (others: unspecified). Starts and ends with a barrier
// (red is reused; every thread's loads are done when it returns).
template <typename C, int THREADS>
CSM_DEVICE MD<C> cols_merge_partials(const C* part, i64 n, int W, int wv, MD<C>* red) {
  constexpr int MB = COLS_SPLIT_MERGE_REGS / (sizeof(C) / 2);  // pairs in flight: 2 or 4 registers each
  const int c = threadIdx.x & (W - 1), R = THREADS / W;
  const i64 r = threadIdx.x / W;
  MD<C> acc = md_identity<C>();
#pragma unroll 1
  for (i64 k0 = r; k0 < n; k0 += (i64)R * MB) {
    MD<C> q[MB];
#pragma unroll
    for (int b = 0; b < MB; ++b) {
      const i64 k = k0 + (i64)b * R;
      q[b] = (k < n && c < wv) ? ldcg_md<C>(part + 2 * (k * W + c)) : md_identity<C>();
    }
    acc = md_merge(acc, md_tree<C, MB>(q));
  }
  return cols_merge_rows<C>(acc, W, R, red);
}

// softmax_cols_sync's FOLD form: a slab (L, fI) of fI elements a row, fI
// not a multiple of the pack, read as (L / fv, fI * fv): rows of fI * fv
// elements are whole 16-byte packs, and column c of the reshaped slab holds
// elements of the original column c % fI (a row of the reshaped slab is fv
// original rows). The totals of original column c are those of the fv
// reshaped columns c % fI + j * fI (j < fv), over the n splits of each:
// part holds the slab's partials (tile t, split k, column w at
// part[2 * ((t * n + k) * W + w)], t from the slab's first tile), i0 the
// reshaped column of this tile's column 0. Like cols_merge_partials: thread j
// takes column j % W of the (j / W)-th, (j / W + R)-th, ... of the fv * n
// partials, MB in flight merged as a tree (the caller's rows stay in
// registers meanwhile: MB is the most that fits beside them without spills
// on sm_80 and sm_90: 2 at NR 16, 4 at NR 4), then the R rows meet in `red` in
// row order; the order depends on n, W, fv and THREADS only, so every block
// merging an original column's partials gets identical totals. On return
// thread w < W holds the total of column w. Starts and ends with a barrier.
template <typename C, int THREADS, int MB>
CSM_DEVICE MD<C> cols_merge_fold(const C* part, int n, int W, int wv, i64 i0, i64 fI, int fv, MD<C>* red) {
  const int c = threadIdx.x & (W - 1), R = THREADS / W, r = threadIdx.x / W;
  const int N = n * fv;
  const i64 oc = c < wv ? (i0 + c) % fI : 0;  // the original column
  MD<C> acc = md_identity<C>();
#pragma unroll 1
  for (int e0 = r; e0 < N; e0 += R * MB) {
    MD<C> q[MB];
#pragma unroll
    for (int b = 0; b < MB; ++b) {
      const int e = e0 + b * R, j = e / n, k = e - j * n;
      const i64 cj = oc + (i64)j * fI;  // reshaped column j of the original column
      q[b] = (e < N && c < wv) ? ldcg_md<C>(part + 2 * (((cj / W) * n + k) * W + (cj & (W - 1))))
                               : md_identity<C>();
    }
    acc = md_merge(acc, md_tree<C, MB>(q));
  }
  return cols_merge_rows<C>(acc, W, R, red);
}

template <typename T, typename C, int VEC, int THREADS, int UNR>
__global__ void __launch_bounds__(THREADS, 1024 / THREADS)
softmax_cols_split_partial(const T* __restrict__ x, C* ws, unsigned* cnt, i64 O, i64 L, i64 I,
                           i64 sxo, i64 sxl, i64 lps, int TX) {
  typedef Pack<T, VEC> P;
  __shared__ MD<C> red[(THREADS / 32) * COLS_SPLIT_W_MAX];
  __shared__ bool last;
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = THREADS / TX;
  const i64 W = (i64)TX * VEC, tiles_i = (I + W - 1) / W;
  const i64 t = blockIdx.x, s = blockIdx.y, tiles = gridDim.x, splits = gridDim.y;
  const i64 o = t / tiles_i, i = (t % tiles_i) * W + (i64)tx * VEC;
  const i64 lb = s * lps, le = min(L, lb + lps);
  C* part = ws;
  C* tot = ws + 2 * tiles * splits * W;
  MD<C> md[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) md[e] = md_identity<C>();
  if (i < I) {
    const i64 step = (i64)NY * sxl;
    const T* xp = x + o * sxo + i + (lb + ly) * sxl;
    i64 l0 = lb + ly;
    // full groups of UNR rows, the next group's loads in flight while this
    // one is reduced
    bool full = l0 + (i64)(UNR - 1) * NY < le;
    P cur[UNR];
    if (full) {
#pragma unroll
      for (int u = 0; u < UNR; ++u) cur[u] = load_pack<T, VEC>(xp + u * step);
    }
    while (full) {
      const bool nfull = l0 + (i64)(2 * UNR - 1) * NY < le;
      P nxt[UNR];
      if (nfull) {
#pragma unroll
        for (int u = 0; u < UNR; ++u) nxt[u] = load_pack<T, VEC>(xp + (UNR + u) * step);
      }
      md_accumulate_packs<C, UNR>(md, cur);
#pragma unroll
      for (int u = 0; u < UNR; ++u) cur[u] = nxt[u];
      l0 += (i64)NY * UNR;
      xp += UNR * step;
      full = nfull;
    }
    for (; l0 < le; l0 += NY, xp += step) {  // the last rows, one at a time
      const P p = load_pack<T, VEC>(xp);
      md_accumulate_packs<C, 1>(md, &p);
    }
  }
  const i64 i0 = (t % tiles_i) * W;  // first column of the tile
  const int cw = threadIdx.x;          // the column this thread totals (if < W)
  const bool own = cw < W && i0 + cw < I;
  MD<C> r = cols_block_reduce<C, VEC, THREADS>(md, tx, TX, red);
  if (own) {
    C* w = part + ((t * splits + s) * W + cw) * 2;
    w[0] = r.m;
    w[1] = r.d;
    if (splits == 1) {
      C* v = tot + (t * W + cw) * 2;
      v[0] = r.m;
      v[1] = r.d;
    }
  }
  if (splits == 1) return;
  // one thread per block fences and counts (a fence in every thread costs
  // microseconds): the barrier orders the block's partial stores before
  // thread 0's fence, which is cumulative
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(cnt + t, 1u) == (unsigned)(splits - 1);
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;
#if COLS_SPLIT_STOP == 1  // (tools/narrow_try.py: the partials without their merge)
  if (threadIdx.x == 0) cnt[t] = 0u;
  return;
#endif
  // the tile's last block: merge every split's partials
  r = cols_merge_partials<C, THREADS>(part + t * splits * W * 2, splits, (int)W, (int)min(W, I - i0), red);
  if (own) {
    C* v = tot + (t * W + cw) * 2;
    v[0] = r.m;
    v[1] = r.d;
  }
  // every block of the tile has counted: the counter goes back to zero for
  // the stream's next launch (the launcher's zeroed workspace)
  if (threadIdx.x == 0) cnt[t] = 0u;
}

// The FOLD finish's total of original column oc: the totals of its fv
// reshaped columns oc + j * fI merged in order, as (max, row_scale) into *out.
// (Not inlined: inlined, it leaves float32 softmax one register short of the
// main loop's 64 on sm_90, a 4-byte spill.)
template <typename C, bool LOG>
__device__ __noinline__ void cols_fold_total(const C* tot, i64 oc, i64 fI, int fv, MD<C>* out) {
  MD<C> q = md_identity<C>();
  for (int j = 0; j < fv; ++j) {
    const i64 cj = oc + (i64)j * fI;
    q = md_merge(q, MD<C>{tot[2 * cj], tot[2 * cj + 1]});
  }
  *out = MD<C>{q.m, row_scale<C, LOG>(q)};
}

template <typename T, typename U, bool LOG, int VEC, int THREADS, int UNR, bool FOLD = false>
__global__ void __launch_bounds__(THREADS, 1024 / THREADS)
softmax_cols_split_finish(const T* __restrict__ x, U* __restrict__ y,
                          const typename ComputeOf2<T, U>::type* __restrict__ ws, i64 O, i64 L, i64 I,
                          i64 sxo, i64 sxl, i64 syo, i64 syl, i64 lps, int TX, i64 fI) {
  typedef typename ComputeOf2<T, U>::type C;
  typedef Pack<T, VEC> P;
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = THREADS / TX;
  const i64 W = (i64)TX * VEC, tiles_i = (I + W - 1) / W;
  const i64 tiles = gridDim.x, splits = gridDim.y;
  const i64 b = tiles * splits - 1 - ((i64)blockIdx.y * tiles + blockIdx.x);  // reverse order
  const i64 t = b % tiles, s = b / tiles;
  const i64 o = t / tiles_i, i = (t % tiles_i) * W + (i64)tx * VEC;
  C m[VEC], sc[VEC];
  if constexpr (FOLD) {  // the block's columns' totals, once a column, into fin
    __shared__ MD<C> fin[COLS_SPLIT_W_MAX];
    const i64 i0 = i - (i64)tx * VEC;  // the tile's first (reshaped) column
    const int c = threadIdx.x;
    if (c < W && i0 + c < I)  // (by reshaped column: the slab's totals from o * tiles_i * W)
      cols_fold_total<C, LOG>(ws + 2 * tiles * splits * W + 2 * o * tiles_i * W, (i0 + c) % fI, fI,
                              (int)(I / fI), fin + c);
    __syncthreads();
    if (i >= I) return;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      m[e] = fin[tx * VEC + e].m;
      sc[e] = fin[tx * VEC + e].d;
    }
  } else {
    if (i >= I) return;
    const C* tot = ws + 2 * tiles * splits * W + (t * W + (i64)tx * VEC) * 2;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      MD<C> q;
      q.m = tot[2 * e];
      q.d = tot[2 * e + 1];
      m[e] = q.m;
      sc[e] = row_scale<C, LOG>(q);
    }
  }
  const i64 lb = s * lps, le = min(L, lb + lps);
  const i64 step = (i64)NY * sxl, ystep = (i64)NY * syl;
  const T* xp = x + o * sxo + i + (lb + ly) * sxl;
  U* yp = y + o * syo + i + (lb + ly) * syl;
  i64 l0 = lb + ly;
  for (; l0 + (i64)(UNR - 1) * NY < le; l0 += (i64)NY * UNR, xp += UNR * step, yp += UNR * ystep) {
    P p[UNR];
#pragma unroll
    for (int u = 0; u < UNR; ++u) p[u] = load_pack<T, VEC>(xp + u * step);
#pragma unroll
    for (int u = 0; u < UNR; ++u) {
      C f[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) f[e] = finish_value<C, LOG>(to_compute<C>(p[u].v[e]), m[e], sc[e]);
      Pack<U, VEC> q;
      convert_pack<U, C, VEC>(f, q);
      store_pack_cols<U, VEC>(yp + u * ystep, q);
    }
  }
  for (; l0 < le; l0 += NY, xp += step, yp += ystep) {
    const P p = load_pack<T, VEC>(xp);
    C f[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) f[e] = finish_value<C, LOG>(to_compute<C>(p.v[e]), m[e], sc[e]);
    Pack<U, VEC> q;
    convert_pack<U, C, VEC>(f, q);
    store_pack_cols<U, VEC>(yp, q);
  }
}

// ---------------------------------------------------------------------------
// softmax_cols_wide_partial + softmax_cols_wide_merge + softmax_cols_wide_finish:
// the (L, I) layout of softmax_cols, one dense slab (O = 1) of a 16-bit type,
// streamed twice in whole-width chunks. The slab runs as (Lf, If) = (L / f,
// I x f) (f = 1, or the rows that make one row of whole 16-byte packs, as the
// FOLD forms); a row is Pf = If / PACK packs and thread p of every block owns
// pack column p (blockDim = Pf rounded up to a warp). Block g of the grid (G)
// owns rows [g * rpc, min(Lf, (g + 1) * rpc)): one contiguous stretch of
// memory, where the split stream's tiles read TX * VEC elements a row.
//   partial: streams its rows (UNR rows in flight a thread, one rescale of the
//            running (max, sum) a batch) and writes its per-column partial to
//            part[g][If];
//   merge:   a warp a column c < I merges the G x f partials part[g][c + j I]
//            (g, then j: a fixed order) into fin[c] = (max, 1 / sum) (LOG:
//            (max, log sum));
//   finish:  re-reads its rows from the last (those the partial kernel read
//            last: in L2 when it ends), evict-first in L2, and writes y with
//            streaming (.cs) stores.
// Workspace (float2): part[G][If], then fin[I]; the pairs move as 8-byte
// words (as MD<float>, two 4-byte accesses a pair, the three launches took
// 7-17 us longer on H100: kernels/wide_stream.txt, runs 8-9). Three launches
// and no co-residency; the dispatcher takes it for large 16-bit slabs whose
// rows are off the 16-byte grid (COLS_WIDE_* in _dispatch.py), where a
// chunk's read is one contiguous range instead of many 128-byte tile rows
// (split stream) or skewed packs in rounds (sync kernel).
// ---------------------------------------------------------------------------
#define COLS_WIDE_MAX_THREADS 1024
template <typename T, int UNR>
__global__ void __launch_bounds__(COLS_WIDE_MAX_THREADS)
softmax_cols_wide_partial(const T* __restrict__ x, float2* __restrict__ part, i64 Lf, int Pf, i64 rpc) {
  constexpr int PACK = 16 / sizeof(T);
  const int p = threadIdx.x;
  if (p >= Pf) return;
  const i64 r0 = (i64)blockIdx.x * rpc;
  const i64 r1 = min(Lf, r0 + rpc);
  const i64 rs = (i64)Pf * PACK;
  MD<float> acc[PACK];
#pragma unroll
  for (int e = 0; e < PACK; ++e) acc[e] = md_identity<float>();
  const T* xp = x + (i64)p * PACK;
  i64 r = r0;
  for (; r + UNR <= r1; r += UNR) {
    Pack<T, PACK> pk[UNR];
#pragma unroll
    for (int u = 0; u < UNR; ++u) pk[u] = load_pack<T, PACK>(xp + (r + u) * rs);
    md_accumulate_packs<float, UNR>(acc, pk);
  }
  for (; r < r1; ++r) {
    const Pack<T, PACK> pk = load_pack<T, PACK>(xp + r * rs);
    md_accumulate_packs<float, 1>(acc, &pk);
  }
  float2* o = part + (i64)blockIdx.x * rs + (i64)p * PACK;  // (8-byte stores)
#pragma unroll
  for (int e = 0; e < PACK; ++e) o[e] = make_float2(acc[e].m, acc[e].d);
}

template <bool LOG>
__global__ void __launch_bounds__(256)
softmax_cols_wide_merge(const float2* __restrict__ part, float2* __restrict__ fin, int G, i64 If, i64 I, int f) {
  const i64 c = (i64)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (c >= I) return;
  const int n = G * f;  // partial q = (g, j): part[g][c + j I], q = g f + j
  MD<float> a = md_identity<float>();
  int q = lane;
  for (; q + 96 < n; q += 128) {
    MD<float> t[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int qq = q + 32 * u, g = qq / f, j = qq - g * f;
      const float2 w = part[(i64)g * If + (i64)j * I + c];
      t[u] = MD<float>{w.x, w.y};
    }
    a = md_merge(a, md_merge_all<float, 4>(t, 1));
  }
  for (; q < n; q += 32) {
    const int g = q / f, j = q - g * f;
    const float2 w = part[(i64)g * If + (i64)j * I + c];
    a = md_merge(a, MD<float>{w.x, w.y});
  }
  a = warp_allreduce_md<float, 32>(a);
  if (lane == 0) fin[c] = make_float2(a.m, row_scale<float, LOG>(a));
}

// 16-byte store evict-first in L2 (st.global.cs): y is not read again here
template <typename T, int N> CSM_DEVICE void store_pack_stream(T* p, const Pack<T, N>& v) {
  if constexpr (sizeof(T) * N == 16) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&v.raw);
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                 "r"(w[3])
                 : "memory");
  } else {
    store_pack<T, N>(p, v);
  }
}

template <typename T, bool LOG, int UNR>
__global__ void __launch_bounds__(COLS_WIDE_MAX_THREADS)
softmax_cols_wide_finish(const T* __restrict__ x, T* __restrict__ y, const float2* __restrict__ fin, i64 Lf,
                         int Pf, i64 I, i64 rpc) {
  constexpr int PACK = 16 / sizeof(T);
  const int p = threadIdx.x;
  if (p >= Pf) return;
  const i64 r0 = (i64)blockIdx.x * rpc;
  const i64 r1 = min(Lf, r0 + rpc);
  const i64 rs = (i64)Pf * PACK;
  float m[PACK], sc[PACK];
#pragma unroll
  for (int e = 0; e < PACK; ++e) {
    const float2 t = fin[((i64)p * PACK + e) % I];
    m[e] = t.x;
    sc[e] = t.y;
  }
  const u64 pol = l2_evict_first();
  const T* xp = x + (i64)p * PACK;
  T* yp = y + (i64)p * PACK;
  i64 r = r1;
  for (; r - UNR >= r0; r -= UNR) {
    Pack<T, PACK> pk[UNR];
#pragma unroll
    for (int u = 0; u < UNR; ++u) pk[u] = load_pack_once<T, PACK>(xp + (r - 1 - u) * rs, pol);
#pragma unroll
    for (int u = 0; u < UNR; ++u) {
      Pack<T, PACK> q;
#pragma unroll
      for (int e = 0; e < PACK; ++e)
        q.v[e] = from_compute<T>(finish_value<float, LOG>(to_compute<float>(pk[u].v[e]), m[e], sc[e]));
      store_pack_stream<T, PACK>(yp + (r - 1 - u) * rs, q);
    }
  }
  for (; r > r0; --r) {
    const Pack<T, PACK> pk = load_pack_once<T, PACK>(xp + (r - 1) * rs, pol);
    Pack<T, PACK> q;
#pragma unroll
    for (int e = 0; e < PACK; ++e)
      q.v[e] = from_compute<T>(finish_value<float, LOG>(to_compute<float>(pk.v[e]), m[e], sc[e]));
    store_pack_stream<T, PACK>(yp + (r - 1) * rs, q);
  }
}

// ---------------------------------------------------------------------------
// softmax_cols_sync: the split stream's layout and tiles in one launch, x read
// once. Work item q = t * splits + s is rows [s * NY * nrs, (s + 1) * NY * nrs)
// of tile t (one o, W = TX * VEC consecutive i); a thread keeps its nrs <= NR packs
// (rows ly, ly + NY, ...) in registers. The grid's G blocks are all resident
// (cooperative launch; G a multiple of splits) and block b takes items b,
// b + G, ...: round j is the whole tiles [j G / splits, (j + 1) G / splits),
// so a tile's blocks are in the same round. nrs (the launcher's) =
// ceil(ceil(L / NY) / splits) <= NR: the axis's NY-row groups shared evenly
// by the splits (the dispatcher may split further than NR needs, to balance
// the rounds), rps = NY * nrs rows a split (kernel arguments, not registers:
// the SK forms at NR 16 are at their register bound). Each block publishes its
// per-column (max, sum) partial, waits at the tile's barrier, merges the
// tile's partials (same order in every block: identical totals) and writes
// its rows. PF (16-byte packs): the block's next item streams
// into shared memory by cp.async (dynamic smem: NR * THREADS packs) while
// this one is reduced, waited for and written. `cnt`: 2 counters per tile,
// zero on entry, left zero (the launcher's per-stream zeroed workspace);
// `part`: tiles * splits * W (m, d). FOLD: see cols_merge_fold. SK: rows off
// the VEC-element grid (x and y alike), each read on its own grid; a tile
// of W columns writes PW = W - 2 VEC of each row, reduces a window of PW +
// VEC - 1 (softmax_cols_cl's SK form has the details), tiles_i = ceil((I +
// VEC - 1) / PW); the rest is the aligned kernel's.
// ---------------------------------------------------------------------------

template <typename T, typename U, bool LOG, int VEC, int THREADS, int NR, int MINB, bool PF,
          bool FOLD = false, bool SK = false>
__global__ void __launch_bounds__(THREADS, MINB)
softmax_cols_sync(const T* __restrict__ x, U* __restrict__ y, i64 O, i64 L, i64 I,
                  i64 sxo, i64 sxl, i64 syo, i64 syl, i64 splits, int TX,
                  typename ComputeOf2<T, U>::type* __restrict__ part, unsigned* __restrict__ cnt, i64 fI,
                  int nrs, int rps) {
  typedef typename ComputeOf2<T, U>::type C;
  typedef Pack<T, VEC> P;
  static_assert(!PF || sizeof(P) == 16, "cp.async moves 16-byte packs");
  static_assert(!(FOLD && SK), "FOLD and SK are separate forms");
  constexpr int WARPS = THREADS / 32;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  P* stage = reinterpret_cast<P*>(smem_raw);  // PF: NR * THREADS packs
  __shared__ MD<C> red[WARPS * COLS_SPLIT_W_MAX];
  __shared__ MD<C> fin[COLS_SPLIT_W_MAX + (SK ? 2 * VEC : 0)];  // (SK: window index + VEC)
  // SK: each thread's item masks, parked here through the reduction and the
  // merge (SKP: held in a register, bfloat16 at NR 16 spills; parked,
  // float16 does, so float16 holds it)
  constexpr bool SKP = SK && !IsSame<T, f16_t>::value;
  __shared__ unsigned sk_s[SKP ? THREADS : 1];
  // (TX: a power of two, the dispatcher's tile width / VEC: shifts, not divisions)
  const int txs = __ffs(TX) - 1, tx = threadIdx.x & (TX - 1), ly0 = threadIdx.x >> txs, NY = THREADS >> txs;
  // SK (skewed packs; softmax_cols_cl's SK form, which has the details): rows
  // off the VEC-element grid, each read on its own grid, a tile's window of
  // PW + VEC - 1 columns reduced and PW columns of each row written (lanes
  // 1 .. TX - 2); the row groups permuted so that a warp's rows are congruent
  // modulo WARPS (a multiple of VEC / gcd(row stride, VEC)) and so share
  // their offset from the grid. y's rows are skewed as x's (the caller).
  const int ly = SK ? (ly0 % (32 >> txs)) * WARPS + ly0 / (32 >> txs) : ly0;
  const i64 W = (i64)TX * VEC, PW = SK ? W - 2 * VEC : W;
  const i64 tiles_i = SK ? (I + VEC - 1 + PW - 1) / PW : (I + W - 1) / W;
  const i64 items = O * tiles_i * splits;
  const i64 xmis = SK ? (i64)(((size_t)x / sizeof(T)) & (VEC - 1)) : 0;
  // SK: a thread's rows share their offset from the grid (NY x the row
  // stride is a multiple of VEC); shl, that of its first row in slab 0
  const i64 shl = SK ? (xmis + (i64)ly * sxl) & (VEC - 1) : 0;
  // item q: its tile t, the columns of the tile (wl: inside I; SK: its
  // window), this thread's offset into x (SK: of its row's aligned pack,
  // whose element e is column cb + e), and its rows inside the axis (u < nv);
  // yoff: its offset into y (recomputed at the write: not held through the
  // merge). SK, packed into one word (see SKP): bits 0-7 `ownw`, the
  // elements inside the window (q0 + e their window index); bits 8-15 `wr`,
  // those written (in the row, lanes 1 .. TX - 2); bits 16-31 q0 + 256.
  auto item = [&](i64 q, i64& t, int& wl, i64& xo, int& nv, unsigned& skp) {
    t = q / splits;
    const i64 s = q - t * splits, o = t / tiles_i, i0 = (t - o * tiles_i) * PW;
    const i64 l0 = (i64)((int)s * rps + ly);  // (32-bit: the sync plans' axes are short)
    if constexpr (SK) {
      wl = (int)(PW + VEC - 1);
      const int sh = (int)((shl + o * sxo) & (VEC - 1));
      const i64 cb = i0 - sh + (i64)(tx - 1) * VEC;
      const int q0 = tx * VEC - sh - 1;
      const bool edge = i0 == 0 || i0 + PW + VEC > I;  // packs reach outside the row
      unsigned ownw = 0u, valid = (1u << VEC) - 1u;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (q0 + e >= 0 && q0 + e < wl) ownw |= 1u << e;
        if (edge && (cb + e < 0 || cb + e >= I)) valid &= ~(1u << e);
      }
      const unsigned wr = (tx >= 1 && tx <= TX - 2) ? valid : 0u;
      skp = ((unsigned)(q0 + 256) << 16) | (wr << 8) | ownw;
      xo = o * sxo + cb + l0 * sxl;
      // (32-bit: a sync plan's axis is at most splits x NY x NR rows; the
      // SK forms at NR 16 spill with the 64-bit form)
      nv = ((ownw & valid) != 0u && l0 < L) ? min(nrs, ((int)(L - l0) + NY - 1) / NY) : 0;
    } else {
      const i64 i = i0 + (i64)tx * VEC;
      wl = (int)min(W, I - i0);
      xo = o * sxo + i + l0 * sxl;
      nv = (i < I && l0 < L) ? (int)min((i64)nrs, (L - l0 + NY - 1) / NY) : 0;
      skp = 0u;
    }
  };
  auto yoff = [&](i64 q, int q0) -> i64 {
    const i64 t = q / splits, s = q - t * splits, o = t / tiles_i, i0 = (t - o * tiles_i) * PW;
    const i64 l0 = (i64)((int)s * rps + ly);  // (32-bit: the sync plans' axes are short)
    if constexpr (SK) {  // (sh = tx x VEC - 1 - q0)
      return o * syo + i0 + q0 + 1 - VEC + l0 * syl;
    } else {
      return o * syo + i0 + (i64)tx * VEC + l0 * syl;
    }
  };
  const i64 xstep = (i64)NY * sxl, ystep = (i64)NY * syl;
  auto prefetch = [&](i64 q) {  // PF: item q's packs into stage
    if (q >= items) return;
    i64 t, xo;
    int wl, nv;
    unsigned skp;
    item(q, t, wl, xo, nv, skp);
#pragma unroll
    for (int u = 0; u < NR; ++u)
      if (u < nv) cp_async16(stage + u * THREADS + threadIdx.x, x + xo + u * xstep);
    cp_async_commit();
  };
#pragma unroll 1
  for (i64 q = blockIdx.x; q < items; q += gridDim.x) {
    i64 t, xo;
    int wl, nv;
    unsigned skp;
    item(q, t, wl, xo, nv, skp);
    if constexpr (SKP) sk_s[threadIdx.x] = skp;
    P v[NR];
    if (!PF || q == blockIdx.x) {
#pragma unroll
      for (int u = 0; u < NR; ++u)
        if (u < nv) v[u] = load_pack<T, VEC>(x + xo + u * xstep);
    } else {  // this thread's own cp.async group: no block barrier needed
      cp_async_wait<0>();
#pragma unroll
      for (int u = 0; u < NR; ++u)
        if (u < nv) v[u] = stage[u * THREADS + threadIdx.x];
    }
    // (SK: values outside the row, in a row's first and last tiles, go to
    // window columns outside the row, whose totals no row uses: a column's
    // total only ever meets its own column's values, so they need no mask)
    // the thread's per-column (max, sum). float16: two sweeps over the held
    // packs, each converting as it goes (the one-sweep form keeps a column's
    // NR converted values live and spills at NR 16); others: md_accumulate
    // (a tree max, then the sum: faster for them, tools/sync_variants.py)
    MD<C> md[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) md[e] = md_identity<C>();
    if constexpr (IsSame<T, f16_t>::value) {
      cols_md_two_sweeps<C, T, VEC, NR>(md, v, nv);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        C c[NR];
#pragma unroll
        for (int u = 0; u < NR; ++u) c[u] = u < nv ? to_compute<C>(v[u].v[e]) : Num<C>::neg_inf();
        md_accumulate<C, NR>(md[e], c);
      }
    }
    // (after v is consumed: the stage slots it came from are free again)
    if (PF) prefetch(q + gridDim.x);
#if COLS_SYNC_STOP == 1  // (tools/prof_cols_sync.py: loads and the thread's (m, d) only)
    if (md[0].m == C(-1e30)) part[0] = md[0].d;
    continue;
#endif
    __syncthreads();  // red may still be read by the previous item
    if constexpr (SK) {
      if constexpr (SKP) skp = sk_s[threadIdx.x];
      cols_warp_fold<C, VEC, COLS_SPLIT_W_MAX, true>(md, TX, red, (int)(skp >> 16) - 256, skp & 0xffu);
    } else {
      cols_warp_fold<C, VEC, COLS_SPLIT_W_MAX>(md, TX, red);
    }
    __syncthreads();
    const int cw = threadIdx.x;
    if (cw < wl) {
      MD<C> r = md_identity<C>();
      for (int w = 0; w < WARPS; ++w) r = md_merge(r, red[w * COLS_SPLIT_W_MAX + cw]);
      C* p = part + (q * W + cw) * 2;  // q = t * splits + s
      p[0] = r.m;
      p[1] = r.d;
    }
    __syncthreads();  // the partial stores precede thread 0's (cumulative) fence
    // the barrier: the tile's blocks; FOLD: every block of the slab (its
    // first tile's counter), whose partials the fold merges
    const i64 tb = FOLD ? t - t % tiles_i : t;
    const unsigned nb = (unsigned)(FOLD ? tiles_i * splits : splits);
    if (threadIdx.x == 0) row_barrier_arrive(cnt + 2 * tb, nb, COLS_SYNC_POLL_NS);
    __syncthreads();
#if COLS_SYNC_STOP == 2  // + block reduction, partials and the barrier
    if (threadIdx.x == 0) row_barrier_depart(cnt + 2 * tb, nb);
    continue;
#endif
    // the tile's column totals (every block of the tile merges the same
    // partials in the same order: identical totals)
    MD<C> tot;
    if constexpr (FOLD)
      tot = cols_merge_fold<C, THREADS, (NR >= 16 ? 2 : 4)>(part + tb * splits * W * 2, (int)splits, (int)W, wl,
                                        (t - tb) * W, fI, (int)(I / fI), red);
    else
      tot = cols_merge_partials<C, THREADS>(part + t * splits * W * 2, splits, (int)W, wl, red);
    // (the merge ends with a barrier: every thread of the block has read the tile's partials)
    if (threadIdx.x == 0) row_barrier_depart(cnt + 2 * tb, nb);
#if COLS_SYNC_STOP == 3  // + the partials' merge (no write)
    if (tot.m == C(-1e30)) part[0] = C(0);
    continue;
#endif
    // once a column: fin[c] = (max, 1 / sum or log sum)
    if (cw < wl) {
      fin[SK ? cw + VEC : cw].m = tot.m;
      fin[SK ? cw + VEC : cw].d = row_scale<C, LOG>(tot);
    }
    __syncthreads();
    if constexpr (SKP) skp = sk_s[threadIdx.x];
    const int q0 = (int)(skp >> 16) - 256;
    const unsigned wr = (skp >> 8) & 0xffu;
    if (nv > 0 && (!SK || wr != 0u)) {
      U* yp = y + yoff(q, q0);  // (advanced a row step at a time: float16 at NR 16 then fits 128 registers)
#pragma unroll
      for (int u = 0; u < NR; ++u) {
        if (u < nv) {
          C f[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            // (SK: an element outside the window reads the padding and is not
            // stored; every written element is inside)
            const int ce = SK ? q0 + VEC + e : tx * VEC + e;
            f[e] = finish_value<C, LOG>(to_compute<C>(v[u].v[e]), fin[ce].m, fin[ce].d);
          }
          Pack<U, VEC> r;
          convert_pack<U, C, VEC>(f, r);
          if (!SK || wr == (1u << VEC) - 1u) {
            store_pack_cols<U, VEC>(yp, r);
          } else {  // a pack over a row's end: its elements in the row
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              if (wr >> e & 1u) yp[e] = r.v[e];
          }
          yp += ystep;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// softmax_cols_cl (sm_90): softmax_cols_sync's layout for tiles whose axis
// fits one cluster's registers, without a grid barrier: a thread-block
// cluster of CL blocks takes NT tiles (grid (CL, ceil(tiles / NT))), block s
// holding rows [s * NY * NR, (s + 1) * NY * NR) of each, NR packs a thread a
// tile. Each block reduces its rows per column and sends its W (m, d)
// partials by st.async into slot s of every block of the cluster, counted
// on that block's mbarrier for the tile (no cluster barrier in the exchange:
// on H100 its release / acquire costs a GPU-scope memory barrier); each
// block waits for the CL x wl partials, merges them in rank order (the same
// totals in every block) and writes its rows. NT = 2 issues both tiles'
// loads first and finishes the first tile while the second's arrive; on
// H100 it was slower everywhere measured (half the blocks; tools/cl_phase.py
// --nt, kernels/cl_phase.txt run 2), so the dispatcher takes NT = 1 and
// NT = 2 stays for experiments (test_cols_cl runs it). Clusters are
// independent, so any number of tiles runs in waves and the launch is an
// ordinary one. A start barrier (arrive after the mbarrier init, wait before
// the first remote write) makes sure every block of the cluster has begun; a
// block exits only after every byte sent to it has landed. Float arithmetic
// (16-bit or float32 input).
// ---------------------------------------------------------------------------
#define COLS_CL_W_MAX 64  // tile width in elements (128 bytes of 16-bit input)
// Phase hook of tools/cl_phase.py (0: the whole kernel; 1: end after the
// block's own partials, 2: after the cluster's exchange, both of the first
// tile; 3: everything but the stores; the library never defines it). Each
// stop keeps a never-taken store of the phase's results, so the compiler
// keeps the work.
// Experiment hook (tools/ab_cols.py): 0 / 1 force the sequential / the
// max-first reduction; 2 (the library's) takes cols_cl_max_first's rule.
#ifndef COLS_CL_MF
#define COLS_CL_MF 2
#endif
#ifndef COLS_CL_STOP
#define COLS_CL_STOP 0
#endif
// Timeline hook of tools/cl_phase.py --trace (-DCOLS_CL_TRACE: thread 0 of
// each of the first 1024 blocks stamps %globaltimer at points 0-6; the
// library never defines it).
#ifdef COLS_CL_TRACE
__device__ unsigned long long cl_trace[1024 * 8];
#define CL_T(i)                                                             \
  do {                                                                      \
    const unsigned b_ = blockIdx.y * gridDim.x + blockIdx.x;                \
    if (threadIdx.x == 0 && b_ < 1024) {                                    \
      unsigned long long t_;                                                \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_)::"memory");      \
      cl_trace[b_ * 8 + (i)] = t_;                                          \
    }                                                                       \
  } while (0)
#else
#define CL_T(i) \
  do {          \
  } while (0)
#endif
// The block reduction of softmax_cols_cl: max first (MF: the warp's column
// maxima by shuffles, one exponential a value against them, sums added over
// the warp, partials merged max first) or sequential (md_accumulate or two
// sweeps a thread, md_merge over the lanes, the warps and the cluster). MF
// takes fewer exponentials and one more shuffle phase; measured (H100,
// tools/ab_cols.py, kernels/cl_mf.txt) faster for bfloat16 everywhere and
// for float16 at NR 8 in clusters of 8, slower for float16 elsewhere and for
// float32 (1000, 1000). Rows a thread that are not a multiple of 4 need it.
// float16 at NR 32 (narrow scalars, 3 blocks an SM: COLS_NARROW_MINB) takes
// the two sweeps: they fit 80 registers there, MF spills 4 bytes.
template <typename T, int NR, int CL> __host__ __device__ constexpr bool cols_cl_max_first() {
  return IsSame<T, bf16_t>::value || (IsSame<T, f16_t>::value && NR >= 8 && NR <= 16 && CL >= 8) ||
         NR % 4 != 0;
}
template <typename T, typename U, bool LOG, int VEC, int THREADS, int NR, int CL, int MINB, int NT,
          bool SK = false>
__global__ void CSM_CLUSTER_DIMS(CL) __launch_bounds__(THREADS, MINB)
softmax_cols_cl(const T* __restrict__ x, U* __restrict__ y, i64 O, i64 L, i64 I,
                i64 sxo, i64 sxl, i64 syo, i64 syl, int TX) {
  typedef typename ComputeOf2<T, U>::type C;
  static_assert(sizeof(C) == 4, "float arithmetic (st.async of (m, d) as two floats)");
  static_assert(NT >= 1 && NT <= 2, "tiles a cluster: 1 or 2");
  typedef Pack<T, VEC> P;
  constexpr int WARPS = THREADS / 32;
  __shared__ MD<C> red[NT][WARPS * COLS_CL_W_MAX];
  __shared__ __align__(8) MD<C> cpart[NT][CL][COLS_CL_W_MAX];  // the cluster's partials, slot = rank
  __shared__ MD<C> fin[NT][COLS_CL_W_MAX];  // the tile's column totals
  __shared__ __align__(8) u64 mbar[NT];
  constexpr bool MF = COLS_CL_MF == 2 ? cols_cl_max_first<T, NR, CL>() : COLS_CL_MF == 1;
  static_assert(MF || NR % 4 == 0, "rows a thread: a multiple of 4 (the sequential reduction)");
  // float32 softmax at NR >= 8 keeps e^(x - base) from the reduction in
  // place of x, so the finish is one multiply an element (one exponential an
  // element in all; H100, kernels/cl_phase.txt run 6: (2048, 1024) at NR 8
  // in clusters of 8 17.2 -> 14.6 us; at NR 4 slower: (1000, 1000) 13.1 -> 14.5)
  constexpr bool KEEP = !LOG && NR >= 8 && IsSame<T, float>::value && IsSame<U, float>::value;
  // CW: float16 converted with to_compute_w at NR 32, which then fits 80
  // registers with scalars (3 blocks an SM); at NR 4-16 the plain form (the
  // wide one was 1-2% slower in the skewed forms, kernels/f16_wide.txt)
  constexpr bool CW = NR >= 32;
  CL_T(0);
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = THREADS / TX;
  const unsigned s = blockIdx.x;  // the cluster spans grid.x: the block's rank
  // SK (skewed packs): rows whose start is off the VEC-element grid. A
  // thread loads the aligned packs of its row, so its element e is column
  // cb + e of the row, cb = i0 - sh + (tx - 1) x VEC, sh the row's offset
  // from the grid (mod VEC), i0 = tile x PW, PW = (TX - 2) x VEC. The row
  // groups are permuted so that a warp's rows are congruent modulo WARPS (a
  // multiple of VEC / gcd(row stride, VEC)): every row of a warp has the same
  // sh, so the warp's lanes with the same tx hold the same columns. A tile
  // reduces the PW + VEC - 1 columns [i0 - VEC + 1, i0 + PW) (its window, which
  // every sh covers: lanes 0 and TX - 1 only load) and writes each row's packs
  // of lanes 1 .. TX - 2, [i0 - sh, i0 - sh + PW): the tiles share no pack of a
  // row (whole-pack stores, but at the row's ends), and the windows of
  // neighbouring tiles overlap by VEC - 1 columns, whose totals both compute
  // alike (the same rows merged in the same order). Values outside the row
  // are masked to -inf in a row's first and last tiles. The caller makes y's
  // rows skewed as x's.
  const int lr = SK ? (ly % (32 / TX)) * WARPS + ly / (32 / TX) : ly;
  const i64 W = (i64)TX * VEC, PW = SK ? W - 2 * VEC : W;
  const i64 tiles_i = SK ? (I + VEC - 1 + PW - 1) / PW : (I + W - 1) / W, ntiles = O * tiles_i;
  const i64 l0 = (i64)s * NY * NR + lr;
  i64 xo[NT], yo[NT];
  int wl[NT], nv[NT];  // wl: cluster-uniform (0: no such tile)
  int q0[NT];  // the window index (partials, totals) of the thread's element 0
  // SK: elements in the tile's window (bit e), in the row, written by this thread;
  // edge: the tile's packs reach outside the row (cluster-uniform)
  unsigned ownw[NT], valid[NT], wr[NT];
  bool edge[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const i64 t = (i64)blockIdx.y * NT + j, o = t / tiles_i, i0 = (t - o * tiles_i) * PW;
    if constexpr (SK) {
      wl[j] = t < ntiles ? (int)(PW + VEC - 1) : 0;
      const i64 sh = ((i64)(((size_t)x / sizeof(T)) & (VEC - 1)) + o * sxo + i0 + l0 * sxl) & (VEC - 1);
      const i64 cb = i0 - sh + (i64)(tx - 1) * VEC;
      q0[j] = tx * VEC - (int)sh - 1;
      ownw[j] = valid[j] = wr[j] = 0u;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const bool in = cb + e >= 0 && cb + e < I;
        if (q0[j] + e >= 0 && q0[j] + e < wl[j]) ownw[j] |= 1u << e;
        if (in) valid[j] |= 1u << e;
        if (in && tx >= 1 && tx <= TX - 2) wr[j] |= 1u << e;
      }
      edge[j] = i0 == 0 || i0 + PW + VEC > I;
      nv[j] = ((ownw[j] & valid[j]) != 0u && l0 < L) ? (int)min((i64)NR, (L - l0 + NY - 1) / NY) : 0;
      xo[j] = o * sxo + cb + l0 * sxl;
      yo[j] = o * syo + cb + l0 * syl;
    } else {
      const i64 i = i0 + (i64)tx * VEC;
      wl[j] = t < ntiles ? (int)min(W, I - i0) : 0;
      nv[j] = (t < ntiles && i < I && l0 < L) ? (int)min((i64)NR, (L - l0 + NY - 1) / NY) : 0;
      xo[j] = o * sxo + i + l0 * sxl;
      yo[j] = o * syo + i + l0 * syl;
      q0[j] = tx * VEC;
      ownw[j] = valid[j] = wr[j] = (1u << VEC) - 1u;
      edge[j] = false;
    }
  }
  if constexpr (CL > 1) {
    if (threadIdx.x == 0) {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        csm_mbar_init(&mbar[j]);
        csm_mbar_expect(&mbar[j], (unsigned)(CL * wl[j] * sizeof(MD<C>)));
      }
      csm_mbar_fence_init();
    }
    __syncthreads();
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  P v[NT][NR];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int u = 0; u < NR; ++u)
      if (u < nv[j]) v[j][u] = load_pack<T, VEC>(x + xo[j] + (i64)u * NY * sxl);
  if constexpr (SK) {
#pragma unroll
    for (int j = 0; j < NT; ++j)
      if (edge[j])
#pragma unroll
        for (int u = 0; u < NR; ++u)
          if (u < nv[j])
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              if (!(valid[j] >> e & 1u)) v[j][u].v[e] = from_compute<T>(Num<C>::neg_inf());
  }
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    if (wl[j] == 0) break;  // (cluster-uniform: no later tile either)
    C base[VEC], lmax[VEC];  // KEEP: what the kept exponentials were taken against, the max they came from
    // max first (MF): the thread's column maxima, then the warp's (lanes with the
    // same tx) by shuffles without exponentials; one exponential a value
    // against the warp max (kept for the finish under KEEP), the sums added
    // over the warp. A warp's (max, sum) is then exact up to the additions.
    if constexpr (MF) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        C mx = Num<C>::neg_inf();
#pragma unroll
        for (int u = 0; u < NR; ++u)
          if (u < nv[j]) mx = Num<C>::max(mx, to_compute_as<CW, C>(v[j][u].v[e]));
        for (int off = TX; off < 32; off <<= 1) mx = Num<C>::max(mx, shfl_xor(mx, off));
        lmax[e] = mx;
        base[e] = mx == Num<C>::neg_inf() ? C(0) : mx;
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        C d[2] = {C(0), C(0)};
#pragma unroll
        for (int u = 0; u < NR; ++u)
          if (u < nv[j]) {
            const C t = Num<C>::exp(to_compute_as<CW, C>(v[j][u].v[e]) - base[e]);
            if constexpr (KEEP) v[j][u].v[e] = t;
            d[u % 2] += t;
          }
        C dd = d[0] + d[1];
        for (int off = TX; off < 32; off <<= 1) dd += shfl_xor(dd, off);
        if (lane < TX && (!SK || (ownw[j] >> e & 1u))) {
          MD<C> w;
          w.m = lmax[e];
          w.d = dd;
          red[j][warp * COLS_CL_W_MAX + (SK ? q0[j] : lane * VEC) + e] = w;
        }
      }
    } else {
      MD<C> md[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) md[e] = md_identity<C>();
      if constexpr (KEEP) {  // max first, then e^(x - base) kept in place of x
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
#pragma unroll
          for (int u = 0; u < NR; ++u)
            if (u < nv[j]) md[e].m = Num<C>::max(md[e].m, v[j][u].v[e]);
          lmax[e] = md[e].m;
          base[e] = lmax[e] == Num<C>::neg_inf() ? C(0) : lmax[e];
          C d[4] = {C(0), C(0), C(0), C(0)};
#pragma unroll
          for (int u = 0; u < NR; ++u)
            if (u < nv[j]) {
              v[j][u].v[e] = Num<C>::exp(v[j][u].v[e] - base[e]);
              d[u % 4] += v[j][u].v[e];
            }
          md[e].d = (d[0] + d[1]) + (d[2] + d[3]);
        }
      } else if constexpr (IsSame<T, f16_t>::value) {  // (as softmax_cols_sync)
        cols_md_two_sweeps<C, T, VEC, NR, CW>(md, v[j], nv[j]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {  // four rows at a time (fewer live registers)
#pragma unroll
          for (int u0 = 0; u0 < NR; u0 += 4) {
            C c[4];
#pragma unroll
            for (int q = 0; q < 4; ++q)
              c[q] = u0 + q < nv[j] ? to_compute_as<CW, C>(v[j][u0 + q].v[e]) : Num<C>::neg_inf();
            md_accumulate<C, 4>(md[e], c);
          }
        }
      }
      cols_warp_fold<C, VEC, COLS_CL_W_MAX, SK>(md, TX, red[j], q0[j], ownw[j]);
    }
    __syncthreads();
    if (j == 0) CL_T(1);
    if constexpr (CL > 1) {
      if (j == 0) asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    }
    if (j == 0) CL_T(2);
#if COLS_CL_STOP == 1
    if ((int)threadIdx.x < wl[j] && red[j][threadIdx.x].d == C(-1)) y[0] = from_compute<U>(C(0));
    return;
#endif
    if ((int)threadIdx.x < wl[j]) {  // this block's partial of column threadIdx.x, to every block
      MD<C> r = md_identity<C>();
      if constexpr (MF) {
        r = md_merge_all<C, WARPS>(&red[j][threadIdx.x], COLS_CL_W_MAX);
      } else {
        for (int w = 0; w < WARPS; ++w) r = md_merge(r, red[j][w * COLS_CL_W_MAX + threadIdx.x]);
      }
      if constexpr (CL > 1) {
#pragma unroll
        for (int q = 0; q < CL; ++q)
          csm_st_async(cluster_map_shared(&cpart[j][s][threadIdx.x], (unsigned)q), r,
                       cluster_map_shared(&mbar[j], (unsigned)q));
      } else {
        cpart[j][0][threadIdx.x] = r;
      }
    }
    if constexpr (CL > 1) {
      csm_mbar_wait_cluster(&mbar[j]);
    } else {
      __syncthreads();
    }
    if (j == 0) CL_T(3);
#if COLS_CL_STOP == 2
    if ((int)threadIdx.x < wl[j] && cpart[j][CL - 1][threadIdx.x].d == C(-1)) y[0] = from_compute<U>(C(0));
    return;
#endif
    // the tile's column totals: 16-bit (VEC 8 columns a thread): once a
    // column into fin[j] (max, 1 / sum or log sum); float32 (4 columns a
    // thread): each thread merges its own columns' (faster there:
    // tools/cl_variants.py, kernels/cl_variants.txt). Both in rank order, so
    // every block gets the same totals. (A tree over CL lanes a column was
    // slower on the small arrays: kernels/cl_phase.txt runs 4-6.)
    constexpr bool OWN = sizeof(T) == 4;
    if (!OWN && (int)threadIdx.x < wl[j]) {
      MD<C> tot = cpart[j][0][threadIdx.x];
      if constexpr (MF) {
        tot = md_merge_all<C, CL>(&cpart[j][0][threadIdx.x], COLS_CL_W_MAX);
      } else {
#pragma unroll
        for (int q = 1; q < CL; ++q) tot = md_merge(tot, cpart[j][q][threadIdx.x]);
      }
      fin[j][threadIdx.x].m = tot.m;
      fin[j][threadIdx.x].d = row_scale<C, LOG>(tot);
    }
    if (!OWN) __syncthreads();
    if (j == 0) CL_T(4);
    if (nv[j] > 0) {
      C m[VEC], sc[VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        // (SK: an element outside the window reads index 0's and is not stored)
        const int ce = SK ? ((ownw[j] >> e & 1u) ? q0[j] + e : 0) : tx * VEC + e;
        if constexpr (OWN) {
          MD<C> tot = cpart[j][0][ce];
          if constexpr (MF) {
            tot = md_merge_all<C, CL>(&cpart[j][0][ce], COLS_CL_W_MAX);
          } else {
#pragma unroll
            for (int q = 1; q < CL; ++q) tot = md_merge(tot, cpart[j][q][ce]);
          }
          m[e] = tot.m;
          sc[e] = row_scale<C, LOG>(tot);
        } else {
          m[e] = fin[j][ce].m;
          sc[e] = fin[j][ce].d;
        }
        // KEEP: y = e^(x - base) * e^(base - m) / d; a thread with no finite
        // value keeps zeros (or NaN), scaled by 0 * (1 / d) (NaN for d = 0)
        if constexpr (KEEP)
          sc[e] = lmax[e] == Num<C>::neg_inf() ? C(0) * sc[e] : Num<C>::exp(base[e] - m[e]) * sc[e];
      }
#pragma unroll
      for (int u = 0; u < NR; ++u) {
        if (u < nv[j]) {
          C f[VEC];
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            if constexpr (KEEP) {
              f[e] = v[j][u].v[e] * sc[e];
            } else {
              f[e] = finish_value<C, LOG>(to_compute_as<CW, C>(v[j][u].v[e]), m[e], sc[e]);
            }
          }
          Pack<U, VEC> r;  // (16-bit output converted two at a time)
          convert_pack<U, C, VEC>(f, r);
#if COLS_CL_STOP == 3  // (everything but the stores)
          if (to_compute<C>(r.v[0]) == C(-7))
#endif
          if (!SK || wr[j] == (1u << VEC) - 1u) {
            store_pack_cols<U, VEC>(y + yo[j] + (i64)u * NY * syl, r);
          } else if (wr[j] != 0u) {  // a pack over a row's end: its elements in the row
#pragma unroll
            for (int e = 0; e < VEC; ++e)
              if (wr[j] >> e & 1u) y[yo[j] + (i64)u * NY * syl + e] = r.v[e];
          }
        }
      }
    }
  }
#ifdef COLS_CL_TRACE
  CL_T(5);
  __syncthreads();
  CL_T(6);
#endif
}

// ---------------------------------------------------------------------------
// softmax_cols_slab: a dense slab (O = 1, rows of I elements, both pointers
// 16-byte aligned, N = L x I a multiple of the pack) as N contiguous
// elements, held on chip whole. The grid's G blocks are all resident
// (cooperative launch, one an SM); block b owns packs [b ppb, (b + 1) ppb).
//   1. Its first PS threads read the slab by 16-byte packs: thread q takes
//      packs q, q + PS, ... (COLS_SLAB_UNROLL in flight, the last batch
//      masked), parks them in
//      shared memory and folds them into the running (max, sum) of its PACK
//      columns. PS x PACK (the "period", at most COLS_SLAB_SLOTS elements)
//      is a multiple of lcm(I, PACK), so every pack a thread takes covers the
//      same PACK columns.
//   2. The period's PS x PACK partials are merged by a tree over its S / I
//      rows into the block's partial of each column, written to
//      part[c * G + b].
//   3. Barrier; warp w of block b merges the G partials of columns b + w G,
//      ... and writes the column's (M, 1/D) (log-softmax: (M, log D)) to tot;
//      barrier; every block loads the I totals.
//   4. Every block normalises its slab from shared memory and writes it
//      (16-bit: element pairs, consecutive in every warp).
// One read of x, one write of y, both contiguous whatever I; two grid
// barriers. In place (y == x) is safe: a block reads and writes only its own
// packs, all reads before any write. `cnt`: 3 counters, zero on entry, left
// zero (the launcher's per-stream zeroed workspace); part: I x G, tot: I.
// ---------------------------------------------------------------------------
#define COLS_SLAB_THREADS 512
#define COLS_SLAB_UNROLL 8
#define COLS_SLAB_SLOTS 4096

// Barrier of the slab kernel's G co-resident blocks on one counter.
CSM_DEVICE void slab_barrier(unsigned* cnt, unsigned n) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // the block's partials (or totals) before it is counted
    atomicAdd(cnt, 1u);
    while (ld_acquire_gpu(cnt) < n) {
    }
  }
  __syncthreads();
}

template <typename T, bool LOG>
__global__ void __launch_bounds__(COLS_SLAB_THREADS, 1)
softmax_cols_slab(const T* __restrict__ x, T* __restrict__ y, i64 N, int I, i64 ppb, int PS,
                  MD<float>* __restrict__ part, MD<float>* __restrict__ tot, unsigned* __restrict__ cnt) {
  typedef float C;
  constexpr int PACK = 16 / sizeof(T), TH = COLS_SLAB_THREADS, UN = COLS_SLAB_UNROLL;
  constexpr int PN = sizeof(T) == 2 ? 2 : 1;  // elements a thread writes at once
  typedef Pack<T, PACK> P;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  P* st = reinterpret_cast<P*>(smem_raw);                          // ppb packs
  MD<C>* fin = reinterpret_cast<MD<C>*>(smem_raw + ppb * 16);       // I totals
  MD<C>* red = fin + I;                                             // PS x PACK slots
  const int G = gridDim.x, b = blockIdx.x, t = threadIdx.x;
  const i64 NP = N / PACK;
  const i64 p0 = min(NP, (i64)b * ppb);
  const int np = (int)(min(NP, p0 + ppb) - p0);
  const i64 e0 = p0 * PACK;
  // 1. stage, folding each pack into its thread's column partials
  if (t < PS) {
    const uint4* xp = reinterpret_cast<const uint4*>(x) + p0;
    MD<C> md[PACK];
#pragma unroll
    for (int e = 0; e < PACK; ++e) md[e] = md_identity<C>();
    for (int p = t; p < np; p += UN * PS) {  // UN packs in flight (the last batch masked)
      P pk[UN];
#pragma unroll
      for (int u = 0; u < UN; ++u)
        if (p + u * PS < np) pk[u].raw = __ldcs(xp + p + u * PS);
#pragma unroll
      for (int u = 0; u < UN; ++u)
        if (p + u * PS < np) st[p + u * PS] = pk[u];
#pragma unroll
      for (int e = 0; e < PACK; ++e) {  // md_accumulate, reading the packs in place (fewer registers)
        C mx = md[e].m;
#pragma unroll
        for (int u = 0; u < UN; ++u)
          if (p + u * PS < np) mx = Num<C>::max(mx, to_compute<C>(pk[u].v[e]));
        const C base = mx == Num<C>::neg_inf() ? C(0) : mx;
        C acc = md[e].d * Num<C>::exp(md[e].m - base);
#pragma unroll
        for (int u = 0; u < UN; ++u)
          if (p + u * PS < np) acc += Num<C>::exp(to_compute<C>(pk[u].v[e]) - base);
        md[e].m = mx;
        md[e].d = acc;
      }
    }
#pragma unroll
    for (int e = 0; e < PACK; ++e) red[t * PACK + e] = md[e];
  }
  __syncthreads();
  // 2. the period's rows merged (slot i + h I into slot i), then slot
  // (c - e0) mod I is column c's partial
  for (int n = PS * PACK / I; n > 1;) {
    const int h = (n + 1) >> 1;
    for (int i = t; i < (n - h) * I; i += TH) red[i] = md_merge(red[i], red[i + h * I]);
    __syncthreads();
    n = h;
  }
  const int e0m = (int)(e0 % I);
  for (int c = t; c < I; c += TH) {
    const int off = c >= e0m ? c - e0m : c - e0m + I;
    part[(i64)c * G + b] = red[off];
  }
  // 3. the columns' totals (the same in every block: one warp merges each)
  slab_barrier(cnt, G);
  {
    const int lane = t & 31, w = t >> 5;
    for (int c = b + w * G; c < I; c += (TH / 32) * G) {
      MD<C> m = md_identity<C>();
      for (int j = lane; j < G; j += 32) {
        MD<C> q;
        q.m = __ldcg(&part[(i64)c * G + j].m);
        q.d = __ldcg(&part[(i64)c * G + j].d);
        m = md_merge(m, q);
      }
      m = warp_allreduce_md<C, 32>(m);
      if (lane == 0) {
        MD<C> f;
        f.m = m.m;
        f.d = row_scale<C, LOG>(m);
        tot[c] = f;
      }
    }
  }
  slab_barrier(cnt + 1, G);
  for (int c = t; c < I; c += TH) {
    fin[c].m = __ldcg(&tot[c].m);
    fin[c].d = __ldcg(&tot[c].d);
  }
  __syncthreads();
  if (t == 0 && atomicAdd(cnt + 2, 1u) == (unsigned)G - 1) {  // every block is past both barriers
    cnt[0] = 0u;
    cnt[1] = 0u;
    cnt[2] = 0u;
    __threadfence();
  }
  // 4. normalise and write: thread t takes elements t PN, (t + TH) PN, ...
  {
    const T* s = reinterpret_cast<const T*>(smem_raw);
    T* yb = y + e0;
    const int ne = np * PACK;
    int c = (int)((e0 + (i64)t * PN) % I);
    const int step = (TH * PN) % I;
#pragma unroll 4
    for (int i = t * PN; i < ne; i += TH * PN) {
      C v[PN];
      int cc = c;
#pragma unroll
      for (int e = 0; e < PN; ++e) {
        v[e] = finish_value<C, LOG>(to_compute<C>(s[i + e]), fin[cc].m, fin[cc].d);
        cc = cc + 1 == I ? 0 : cc + 1;
      }
      Pack<T, PN> o;
      convert_pack<T, C, PN>(v, o);
      store_pack<T, PN>(yb + i, o);
      c += step;
      if (c >= I) c -= I;
    }
  }
}
