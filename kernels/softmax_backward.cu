// cusoftmax/kernels/softmax_backward.cu -- softmax and log-softmax backward.
//
//   softmax:      dx = y * (dy - s),       s = sum_j y_j * dy_j
//   log-softmax:  dx = dy - e^y * s,       s = sum_j dy_j
//
// The reduction is a plain sum (no max), so every regime reads y and dy once,
// reduces one value per row and writes dx once; y * dy is never stored.
// Log-softmax's sum needs only dy: its kernels read y after the reduction
// (the streaming ones read y once, not twice).
//
// Kernels (the dispatcher in cusoftmax/_dispatch.py, section "backward",
// picks one per call), mirroring the forward's regimes:
//   softmax_backward_warp     short rows: LANES lanes per row, row in registers.
//   softmax_backward_block    medium rows: one block per row, row in registers.
//   softmax_backward_cluster  long rows (sm_90+): CLUSTER blocks per row, row in
//                             registers, block sums exchanged through DSMEM.
//   softmax_backward_smem     many rows of a few tens of KB: rows staged in
//                             shared memory by cp.async; log-softmax stages dy
//                             one row a block, several blocks an SM (MINB);
//                             softmax stages y and dy in a persistent block,
//                             the next row in flight while one is reduced.
//   softmax_backward_stream   rows too long to keep on chip: one block per row,
//                             pass 1 sums, pass 2 re-reads and writes.
//   softmax_backward_cstream  the same two passes by a cluster per row (sm_90+),
//                             each block over a slice: the re-read hits L2.
//   softmax_backward_split_partial + softmax_backward_split_finish
//                             few long rows: each row over SPLITS blocks; the
//                             per-block sums go to a workspace (rows x splits),
//                             the second kernel adds them and writes its slice.
//   softmax_backward_cols     reduction along a strided axis with a
//                             unit-stride inner axis (coalesced along it).
// Template parameters: TY (y storage), TD (dy storage), U (dx storage), LOG;
// arithmetic in C = double if any of them is double, else float.
//
// Registers hold y and dy (two values per element; converted to C, or as
// stored in raw packs where all of a thread's loads are issued first: the
// streams, the block kernel's multi-pack rows): the dispatcher gives a thread
// half the forward's elements, so no kernel spills.
#include "common.cuh"

template <typename TY, typename TD, typename U> struct BwdCompute {
  typedef typename ComputeOf<TY>::type CY;
  typedef typename ComputeOf<TD>::type CD;
  typedef typename ComputeOf<U>::type CU;
  // double if any side is double, else float
  typedef decltype(CY() + CD() + CU()) type;
};

// exp_f64: see common.cuh
template <typename C> CSM_DEVICE C bwd_exp(C x);
template <> CSM_DEVICE float bwd_exp<float>(float x) { return Num<float>::exp(x); }
template <> CSM_DEVICE double bwd_exp<double>(double x) { return exp_f64(x); }

// The summand and the gradient of one element.
template <typename C, bool LOG> CSM_DEVICE C bwd_term(C y, C dy) { return LOG ? dy : y * dy; }
template <typename C, bool LOG> CSM_DEVICE C bwd_grad(C y, C dy, C s) {
  if (LOG) return dy - bwd_exp<C>(y) * s;  // e^y = p (y = log p)
  return y * (dy - s);
}

// Load what the sum needs of pack `p`: y and dy for softmax, only dy for
// log-softmax (its sum is sum_j dy_j; y is read when dx is written).
template <typename C, bool LOG, typename TY, typename TD, int PACK>
CSM_DEVICE void load_for_sum(const TY* yr, const TD* dr, i64 p, int mis, i64 L, C* yv, C* dv) {
  if (!LOG) load_row_pack<C, TY, PACK>(yr, p, mis, L, C(0), yv);
  load_row_pack<C, TD, PACK>(dr, p, mis, L, C(0), dv);
}

// Sum of the summands of N values held by one thread.
template <typename C, bool LOG, int N> CSM_DEVICE C values_sum(const C* yv, const C* dv) {
  C s0 = C(0), s1 = C(0);  // two chains: half the dependent-add latency
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const C t = LOG ? dv[i] : yv[i] * dv[i];  // (log: yv not loaded yet)
    if (i & 1) s1 += t; else s0 += t;
  }
  return s0 + s1;
}

// Write dx for pack `p` of a row (masked to [0, L)) from its y and dy values.
template <typename C, bool LOG, typename U, int PACK>
CSM_DEVICE void store_grad_pack(U* row, i64 p, int mis, i64 L, const C* yv, const C* dv, C s) {
  C o[PACK];
#pragma unroll
  for (int e = 0; e < PACK; ++e) o[e] = bwd_grad<C, LOG>(yv[e], dv[e], s);
  store_row_pack<U, C, PACK>(row, p, mis, L, o);
}

// Write dx for pack `p` of a row held in registers; log-softmax loads its y
// pack here (not held through the reduction).
template <typename C, bool LOG, typename TY, typename U, int PACK>
CSM_DEVICE void store_held_pack(const TY* yr, U* xr, i64 p, int mis, i64 L, C* yv, const C* dv, C s) {
  if (LOG) load_row_pack<C, TY, PACK>(yr, p, mis, L, C(0), yv);
  store_grad_pack<C, LOG, U, PACK>(xr, p, mis, L, yv, dv, s);
}

// ---------------------------------------------------------------------------
// Raw packs: a thread's N packs p0, p0 + stride, ... of a row, loaded as
// stored (16-bit values take half the registers of floats) and only below
// pend <= the row's packs (a pack overlapping the row: an aligned access in
// its allocation). All N loads are issued before any value is used, so their
// latencies overlap; elements outside [0, L) are masked to 0 on unpacking.
// ---------------------------------------------------------------------------
template <typename C, typename T, int PACK>
CSM_DEVICE void unpack_masked(const Pack<T, PACK>& pk, i64 p, int mis, i64 L, C* out) {
#pragma unroll
  for (int e = 0; e < PACK; ++e) {
    const i64 c = p * PACK - mis + e;
    out[e] = (c >= 0 && c < L) ? to_compute<C>(pk.v[e]) : C(0);
  }
}

template <typename T, int PACK, int N>
CSM_DEVICE void load_raw(const T* row, i64 p0, i64 stride, int mis, i64 pend, Pack<T, PACK>* k) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const i64 p = p0 + u * stride;
    if (p < pend) k[u] = load_pack<T, PACK>(row + (p * PACK - mis));
  }
}

// The sum's share of N raw packs (y unused by log-softmax).
template <typename C, bool LOG, typename TY, typename TD, int PACK, int N>
CSM_DEVICE C raw_sum(const Pack<TY, PACK>* yk, const Pack<TD, PACK>* dk, i64 p0, i64 stride, int mis,
                     i64 L, i64 pend) {
  C acc = C(0);
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const i64 p = p0 + u * stride;
    if (p < pend) {
      C yv[PACK], dv[PACK];
      if (!LOG) unpack_masked<C, TY, PACK>(yk[u], p, mis, L, yv);
      unpack_masked<C, TD, PACK>(dk[u], p, mis, L, dv);
      acc += values_sum<C, LOG, PACK>(yv, dv);
    }
  }
  return acc;
}

// dx for N raw packs of y and dy.
template <typename C, bool LOG, typename TY, typename TD, typename U, int PACK, int N>
CSM_DEVICE void raw_store(U* xr, const Pack<TY, PACK>* yk, const Pack<TD, PACK>* dk, i64 p0, i64 stride,
                          int mis, i64 L, i64 pend, C s) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    const i64 p = p0 + u * stride;
    if (p < pend) {
      C yv[PACK], dv[PACK];
      unpack_masked<C, TY, PACK>(yk[u], p, mis, L, yv);
      unpack_masked<C, TD, PACK>(dk[u], p, mis, L, dv);
      store_grad_pack<C, LOG, U, PACK>(xr, p, mis, L, yv, dv, s);
    }
  }
}

// ---------------------------------------------------------------------------
// softmax_backward_warp: LANES consecutive lanes own one row; lane l of a
// group holds packs l, l + LANES, ... (NP of them) of y and dy. A warp covers
// 32 / LANES rows at a time; warps stride over the rows.
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename U, bool LOG, int PACK, int NP, int LANES>
__global__ void __launch_bounds__(128, 1)
softmax_backward_warp(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                      i64 rows, i64 L, i64 sy, i64 sd, i64 sx) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  constexpr int RPW = 32 / LANES;  // rows per warp
  const int lane = threadIdx.x & 31;
  const int g = lane / LANES, lg = lane % LANES;
  const i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
  for (i64 r0 = warp * RPW; r0 < rows; r0 += nwarps * RPW) {
    const i64 r = r0 + g;
    const bool active = r < rows;
    C yv[NP * PACK], dv[NP * PACK];
    int mis = 0;
    const TY* yr = y + (active ? r : 0) * sy;
    if (active) {
      const TD* dr = dy + r * sd;
      mis = row_misalignment<TY, PACK>(yr);
#pragma unroll
      for (int i = 0; i < NP; ++i)
        load_for_sum<C, LOG, TY, TD, PACK>(yr, dr, (i64)i * LANES + lg, mis, L, yv + i * PACK, dv + i * PACK);
    } else {
#pragma unroll
      for (int i = 0; i < NP * PACK; ++i) yv[i] = dv[i] = C(0);
    }
    C s = values_sum<C, LOG, NP * PACK>(yv, dv);
    s = warp_allreduce_sum<C, LANES>(s);
    if (active) {
      U* xr = dx + r * sx;
#pragma unroll
      for (int i = 0; i < NP; ++i)
        store_held_pack<C, LOG, TY, U, PACK>(yr, xr, (i64)i * LANES + lg, mis, L, yv + i * PACK, dv + i * PACK, s);
    }
  }
}

// ---------------------------------------------------------------------------
// softmax_backward_block: one block per row (blocks stride over rows); thread
// t holds packs t, t + THREADS, ... (NP of them) of y and dy. H100
// (tools/ab_src.py, kernels/ab_bwd_raw*.txt): raw packs with NP >= 2, 1.07-1.29x
// (float32 softmax 4096 x 16384 1.28x); with NP = 1 they take 44-55
// registers instead of 30-32, half the blocks an SM: 0.85-0.91x on many rows.
// Launch bounds above one block (MINB > 1) and scalar rows (PACK = 1, up to
// 16 packs) spill with them, so those convert on load.
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename U, bool LOG, int PACK, int NP, int THREADS, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
softmax_backward_block(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                       i64 rows, i64 L, i64 sy, i64 sd, i64 sx) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  __shared__ C red[THREADS / 32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const TY* yr = y + r * sy;
    const TD* dr = dy + r * sd;
    const int mis = row_misalignment<TY, PACK>(yr);
    if constexpr (NP >= 2 && MINB == 1 && PACK > 1) {  // raw packs: every load in flight first
      const i64 np = row_packs<PACK>(L, mis);
      Pack<TY, PACK> yk[NP];
      Pack<TD, PACK> dk[NP];
      if (!LOG) load_raw<TY, PACK, NP>(yr, threadIdx.x, THREADS, mis, np, yk);
      load_raw<TD, PACK, NP>(dr, threadIdx.x, THREADS, mis, np, dk);
      C s = raw_sum<C, LOG, TY, TD, PACK, NP>(yk, dk, threadIdx.x, THREADS, mis, L, np);
      s = block_allreduce_sum<C, THREADS>(s, red);  // ends with a barrier
      if (LOG) load_raw<TY, PACK, NP>(yr, threadIdx.x, THREADS, mis, np, yk);
      raw_store<C, LOG, TY, TD, U, PACK, NP>(dx + r * sx, yk, dk, threadIdx.x, THREADS, mis, L, np, s);
    } else {  // converted on load: fewer registers (2 blocks of 1024 an SM; no spill at MINB > 1)
      C yv[NP * PACK], dv[NP * PACK];
#pragma unroll
      for (int i = 0; i < NP; ++i)
        load_for_sum<C, LOG, TY, TD, PACK>(yr, dr, (i64)i * THREADS + threadIdx.x, mis, L, yv + i * PACK,
                                           dv + i * PACK);
      C s = values_sum<C, LOG, NP * PACK>(yv, dv);
      s = block_allreduce_sum<C, THREADS>(s, red);  // ends with a barrier
      U* xr = dx + r * sx;
#pragma unroll
      for (int i = 0; i < NP; ++i)
        store_held_pack<C, LOG, TY, U, PACK>(yr, xr, (i64)i * THREADS + threadIdx.x, mis, L, yv + i * PACK,
                                             dv + i * PACK, s);
    }
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---------------------------------------------------------------------------
// softmax_backward_cluster: CLUSTER blocks per row (clusters stride over rows).
// Block `rank` holds packs [rank * NP * THREADS, (rank + 1) * NP * THREADS) of
// the row. Each block reduces its sum, publishes it in shared memory, and
// after a cluster barrier every warp adds the CLUSTER sums read through
// distributed shared memory (same order everywhere: identical totals).
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename U, bool LOG, int PACK, int NP, int THREADS, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
softmax_backward_cluster(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                         i64 rows, i64 L, i64 sy, i64 sd, i64 sx) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  __shared__ C red[THREADS / 32];
  __shared__ C part[1];
  const unsigned rank = cluster_ctarank();
  const i64 cid = blockIdx.x / CLUSTER, nclusters = gridDim.x / CLUSTER;
  const i64 base = (i64)rank * NP * THREADS;
  const int lane = threadIdx.x & 31;
  for (i64 r = cid; r < rows; r += nclusters) {
    const TY* yr = y + r * sy;
    const TD* dr = dy + r * sd;
    const int mis = row_misalignment<TY, PACK>(yr);
    C yv[NP * PACK], dv[NP * PACK];
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      load_for_sum<C, LOG, TY, TD, PACK>(yr, dr, base + (i64)i * THREADS + threadIdx.x, mis, L, yv + i * PACK, dv + i * PACK);
    }
    C s = values_sum<C, LOG, NP * PACK>(yv, dv);
    s = block_allreduce_sum<C, THREADS>(s, red);
    if (threadIdx.x == 0) part[0] = s;
    cluster_sync();  // block sums visible cluster-wide
    C tot = C(0);
    if (lane < CLUSTER) tot = ld_shared_cluster(cluster_map_shared(part, (unsigned)lane), C());
    tot = warp_allreduce_sum<C, 32>(tot);
    cluster_sync();  // every block has read the sums before they change or exit
    U* xr = dx + r * sx;
#pragma unroll
    for (int i = 0; i < NP; ++i)
      store_held_pack<C, LOG, TY, U, PACK>(yr, xr, base + (i64)i * THREADS + threadIdx.x, mis, L, yv + i * PACK, dv + i * PACK, tot);
  }
}
#endif

// ---------------------------------------------------------------------------
// softmax_backward_smem: many rows of a few tens of KB. Blocks stride over
// rows; each stages its next rows in shared memory with cp.async (STAGES - 1
// rows in flight) while it reduces and writes the current one. STAGES = 1
// with one row per block (grid = rows) and MINB blocks an SM is the
// full-occupancy form: the other resident blocks' loads cover a block's
// reduction. Staged: dy, and y for softmax (log-softmax reads y from global
// when dx is written, UN packs a thread in flight). One read of y and dy, one
// write of dx. Dynamic shared memory: STAGES * cpk * 16 bytes per staged
// array, cpk >= the packs of a row (run time). PACK * sizeof of every staged
// type is 16 (the dispatcher's condition for this kernel).
// ---------------------------------------------------------------------------
template <typename T, int PACK, int THREADS>
CSM_DEVICE void bwd_prefetch(Pack<T, PACK>* buf, const T* row, i64 np, int mis) {
  for (i64 p = threadIdx.x; p < np; p += THREADS) cp_async16(buf + p, row + (p * PACK - mis));
}

template <typename TY, typename TD, typename U, bool LOG, int PACK, int THREADS, int STAGES, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
softmax_backward_smem(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                      i64 rows, i64 L, i64 sy, i64 sd, i64 sx, i64 cpk) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Pack<TD, PACK>* dbuf = reinterpret_cast<Pack<TD, PACK>*>(smem_raw);
  Pack<TY, PACK>* ybuf = reinterpret_cast<Pack<TY, PACK>*>(smem_raw + (size_t)STAGES * cpk * 16);
  __shared__ C red[THREADS / 32];
  auto prefetch = [&](i64 rr, int st) {
    const TY* yr = y + rr * sy;
    const int mis = row_misalignment<TY, PACK>(yr);
    const i64 np = row_packs<PACK>(L, mis);
    bwd_prefetch<TD, PACK, THREADS>(dbuf + st * cpk, dy + rr * sd, np, mis);
    if (!LOG) bwd_prefetch<TY, PACK, THREADS>(ybuf + st * cpk, yr, np, mis);
  };
  i64 r = blockIdx.x;
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    const i64 rp = r + st * (i64)gridDim.x;
    if (rp < rows) prefetch(rp, st);
    cp_async_commit();
  }
  for (int it = 0; r < rows; ++it, r += gridDim.x) {
    const int cur = it % STAGES;
    const i64 rn = r + (STAGES - 1) * (i64)gridDim.x;  // refill the stage freed last iteration
    if (rn < rows) prefetch(rn, (it + STAGES - 1) % STAGES);
    cp_async_commit();
    const TY* yr = y + r * sy;
    const int mis = row_misalignment<TY, PACK>(yr);
    const i64 np = row_packs<PACK>(L, mis);
    cp_async_wait<STAGES - 1>();  // this row's group has landed
    __syncthreads();
    const Pack<TD, PACK>* db = dbuf + cur * cpk;
    const Pack<TY, PACK>* yb = ybuf + cur * cpk;
    C s = C(0);
    for (i64 p = threadIdx.x; p < np; p += THREADS) {
      C dv[PACK], yv[PACK];
      unpack_masked<C, TD, PACK>(db[p], p, mis, L, dv);
      if (!LOG) unpack_masked<C, TY, PACK>(yb[p], p, mis, L, yv);
#pragma unroll
      for (int e = 0; e < PACK; ++e) s += LOG ? dv[e] : yv[e] * dv[e];
    }
    s = block_allreduce_sum<C, THREADS>(s, red);
    U* xr = dx + r * sx;
    // log: UN loads of y in flight a thread (1 within the 32-40 registers of
    // 3-4 blocks an SM: more spills)
    constexpr int UN = LOG ? (MINB > 2 ? 1 : 4) : 1;
    for (i64 p0 = threadIdx.x; p0 < np; p0 += (i64)THREADS * UN) {
      Pack<TY, PACK> yk[UN];  // raw packs: half the registers of floats for 16-bit y
#pragma unroll
      for (int u = 0; u < UN; ++u) {
        const i64 p = p0 + (i64)u * THREADS;
        if (p < np) yk[u] = LOG ? load_pack<TY, PACK>(yr + (p * PACK - mis)) : yb[p];
      }
#pragma unroll
      for (int u = 0; u < UN; ++u) {
        const i64 p = p0 + (i64)u * THREADS;
        if (p < np) {
          C yv[PACK], dv[PACK];
          unpack_masked<C, TY, PACK>(yk[u], p, mis, L, yv);
          unpack_masked<C, TD, PACK>(db[p], p, mis, L, dv);
          store_grad_pack<C, LOG, U, PACK>(xr, p, mis, L, yv, dv, s);
        }
      }
    }
    __syncthreads();  // everyone is done with stage `cur` before it is refilled
  }
  cp_async_wait<0>();
}

// ---------------------------------------------------------------------------
// Streaming passes over packs [p_begin, p_end) of one row by THREADS threads,
// UNROLL packs of each array in flight per thread.
// ---------------------------------------------------------------------------
template <typename C, bool LOG, typename TY, typename TD, int PACK, int UNROLL, int THREADS>
CSM_DEVICE C stream_bwd_sum(const TY* yr, const TD* dr, i64 p_begin, i64 p_end, int mis, i64 L) {
  C acc = C(0);
  for (i64 p0 = p_begin + threadIdx.x; p0 < p_end; p0 += (i64)THREADS * UNROLL) {
    Pack<TY, PACK> yk[UNROLL];
    Pack<TD, PACK> dk[UNROLL];
    if (!LOG) load_raw<TY, PACK, UNROLL>(yr, p0, THREADS, mis, p_end, yk);
    load_raw<TD, PACK, UNROLL>(dr, p0, THREADS, mis, p_end, dk);
    acc += raw_sum<C, LOG, TY, TD, PACK, UNROLL>(yk, dk, p0, THREADS, mis, L, p_end);
  }
  return acc;
}

// REV: batches from the end of the range back (the sum pass read the end
// last, so that part of the row is the likeliest to still be in L2).
template <typename C, bool LOG, typename TY, typename TD, typename U, int PACK, int UNROLL, int THREADS,
          bool REV = false>
CSM_DEVICE void stream_bwd_write(const TY* yr, const TD* dr, U* xr, i64 p_begin, i64 p_end, int mis,
                                 i64 L, C s) {
  const i64 step = (i64)THREADS * UNROLL;
  const i64 nb = (p_end - p_begin + step - 1) / step;
  for (i64 j = 0; j < nb; ++j) {
    const i64 p0 = p_begin + (REV ? nb - 1 - j : j) * step + threadIdx.x;
    Pack<TY, PACK> yk[UNROLL];
    Pack<TD, PACK> dk[UNROLL];
    load_raw<TY, PACK, UNROLL>(yr, p0, THREADS, mis, p_end, yk);
    load_raw<TD, PACK, UNROLL>(dr, p0, THREADS, mis, p_end, dk);
    raw_store<C, LOG, TY, TD, U, PACK, UNROLL>(xr, yk, dk, p0, THREADS, mis, L, p_end, s);
  }
}

// ---------------------------------------------------------------------------
// softmax_backward_stream: one block per row (blocks stride over rows):
// s = sum over the row (read y, dy), then dx (read y, dy, write dx); REV:
// the write pass runs from the row's end back.
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename U, bool LOG, int PACK, int UNROLL, int THREADS, bool REV>
__global__ void __launch_bounds__(THREADS, 1)
softmax_backward_stream(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                        i64 rows, i64 L, i64 sy, i64 sd, i64 sx) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  __shared__ C red[THREADS / 32];
  for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
    const TY* yr = y + r * sy;
    const TD* dr = dy + r * sd;
    const int mis = row_misalignment<TY, PACK>(yr);
    const i64 np = row_packs<PACK>(L, mis);
    C s = stream_bwd_sum<C, LOG, TY, TD, PACK, UNROLL, THREADS>(yr, dr, 0, np, mis, L);
    s = block_allreduce_sum<C, THREADS>(s, red);
    stream_bwd_write<C, LOG, TY, TD, U, PACK, UNROLL, THREADS, REV>(yr, dr, dx + r * sx, 0, np, mis, L, s);
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---------------------------------------------------------------------------
// softmax_backward_cstream: rows too long for the registers of a cluster,
// streamed by a cluster of CLUSTER blocks per row (clusters stride over
// rows). Block `rank` owns packs [rank * cpk, (rank + 1) * cpk) of the row
// (cpk run time): it sums its slice, the CLUSTER sums meet through
// distributed shared memory, and it writes its slice, re-reading it from the
// end back. A slice is 1 / CLUSTER of a row, so the bytes read between the
// sum and the re-read of a slice (one slice per resident block) fit in L2
// where a whole row per SM would not: the re-read costs no DRAM traffic.
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename U, bool LOG, int PACK, int UNROLL, int THREADS, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS)
softmax_backward_cstream(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                         i64 rows, i64 L, i64 sy, i64 sd, i64 sx, i64 cpk) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  __shared__ C red[THREADS / 32];
  __shared__ C part[1];
  const unsigned rank = cluster_ctarank();
  const i64 cid = blockIdx.x / CLUSTER, nclusters = gridDim.x / CLUSTER;
  const int lane = threadIdx.x & 31;
  for (i64 r = cid; r < rows; r += nclusters) {
    const TY* yr = y + r * sy;
    const TD* dr = dy + r * sd;
    const int mis = row_misalignment<TY, PACK>(yr);
    const i64 np = row_packs<PACK>(L, mis);
    const i64 pb = min(np, (i64)rank * cpk), pe = min(np, pb + cpk);
    C s = stream_bwd_sum<C, LOG, TY, TD, PACK, UNROLL, THREADS>(yr, dr, pb, pe, mis, L);
    s = block_allreduce_sum<C, THREADS>(s, red);
    if (threadIdx.x == 0) part[0] = s;
    cluster_sync();  // block sums visible cluster-wide
    C tot = C(0);
    if (lane < CLUSTER) tot = ld_shared_cluster(cluster_map_shared(part, (unsigned)lane), C());
    tot = warp_allreduce_sum<C, 32>(tot);
    cluster_sync();  // every block has read the sums before they change or exit
    stream_bwd_write<C, LOG, TY, TD, U, PACK, UNROLL, THREADS, true>(yr, dr, dx + r * sx, pb, pe, mis, L, tot);
  }
}
#endif

// ---------------------------------------------------------------------------
// Few long rows: grid (splits, rows); block (s, r) owns packs
// [s * pps, (s + 1) * pps) of row r. ws holds rows * splits sums of C.
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename C, bool LOG, int PACK, int UNROLL, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
softmax_backward_split_partial(const TY* __restrict__ y, const TD* __restrict__ dy, C* __restrict__ ws,
                               i64 rows, i64 L, i64 sy, i64 sd, i64 pps) {
  __shared__ C red[THREADS / 32];
  const i64 r = blockIdx.y, s = blockIdx.x, splits = gridDim.x;
  const TY* yr = y + r * sy;
  const TD* dr = dy + r * sd;
  const int mis = row_misalignment<TY, PACK>(yr);
  const i64 np = row_packs<PACK>(L, mis);
  const i64 pb = s * pps, pe = min(np, pb + pps);
  C acc = stream_bwd_sum<C, LOG, TY, TD, PACK, UNROLL, THREADS>(yr, dr, pb, pe, mis, L);
  acc = block_allreduce_sum<C, THREADS>(acc, red);
  if (threadIdx.x == 0) ws[r * splits + s] = acc;
}

template <typename TY, typename TD, typename U, bool LOG, int PACK, int UNROLL, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
softmax_backward_split_finish(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                              const typename BwdCompute<TY, TD, U>::type* __restrict__ ws,
                              i64 rows, i64 L, i64 sy, i64 sd, i64 sx, i64 pps) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  __shared__ C red[THREADS / 32];
  const i64 r = blockIdx.y, s = blockIdx.x, splits = gridDim.x;
  C tot = C(0);
  for (i64 k = threadIdx.x; k < splits; k += THREADS) tot += ws[r * splits + k];
  tot = block_allreduce_sum<C, THREADS>(tot, red);  // same order in every block
  const TY* yr = y + r * sy;
  const TD* dr = dy + r * sd;
  const int mis = row_misalignment<TY, PACK>(yr);
  const i64 np = row_packs<PACK>(L, mis);
  const i64 pb = s * pps, pe = min(np, pb + pps);
  stream_bwd_write<C, LOG, TY, TD, U, PACK, UNROLL, THREADS>(yr, dr, dx + r * sx, pb, pe, mis, L, tot);
}

// ---------------------------------------------------------------------------
// softmax_backward_cols: arrays viewed as (O, L, I), element (o, l, i) of y at
// o*syo + l*syl + i (unit inner stride; likewise dy, dx). A tile is one o and
// TX consecutive i (TX a power of two <= 32, chosen at run time); the block's
// THREADS / TX thread rows split the L axis (thread row ly owns l = ly,
// ly + NY, ...). A thread holds up to CAP elements of y and dy in registers
// (one read); longer axes stream twice (sum, then write). Pointers advance by
// NY * stride so only one address per array is live.
// ---------------------------------------------------------------------------
template <typename TY, typename TD, typename U, bool LOG, int CAP, int THREADS>
__global__ void __launch_bounds__(THREADS, 1)
softmax_backward_cols(const TY* __restrict__ y, const TD* __restrict__ dy, U* __restrict__ dx,
                      i64 O, i64 L, i64 I, i64 syo, i64 syl, i64 sdo, i64 sdl, i64 sxo, i64 sxl,
                      int TX) {
  typedef typename BwdCompute<TY, TD, U>::type C;
  constexpr int WARPS = THREADS / 32;
  __shared__ C red[WARPS * 32];
  const int tx = threadIdx.x % TX, ly = threadIdx.x / TX, NY = THREADS / TX;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 tiles_i = (I + TX - 1) / TX, tiles = O * tiles_i;
  const bool in_regs = L <= (i64)NY * CAP;
  // elements of the axis this thread row owns (in_regs: at most CAP)
  const i64 mine = (L > ly) ? (L - ly + NY - 1) / NY : 0;
  const i64 ystep = NY * syl, dstep = NY * sdl, xstep = NY * sxl;
  for (i64 t = blockIdx.x; t < tiles; t += gridDim.x) {
    const i64 o = t / tiles_i, i = (t % tiles_i) * TX + tx;
    const bool ok = i < I;
    const i64 n = ok ? mine : 0;
    const i64 ys = ystep, ds = dstep, xs = xstep;
    const TY* yp = y + o * syo + (ok ? i : 0) + ly * syl;
    const TD* dp = dy + o * sdo + (ok ? i : 0) + ly * sdl;
    U* xp = dx + o * sxo + (ok ? i : 0) + ly * sxl;
    C yv[CAP], dv[CAP];
    C s = C(0);
    if (in_regs) {
#pragma unroll
      for (int k = 0; k < CAP; ++k) {
        yv[k] = dv[k] = C(0);
        if (k < n) {
          if (!LOG) yv[k] = to_compute<C>(yp[k * ys]);
          dv[k] = to_compute<C>(dp[k * ds]);
        }
      }
#pragma unroll
      for (int k = 0; k < CAP; ++k) s += LOG ? dv[k] : yv[k] * dv[k];
    } else {
      const TY* yq = yp;
      const TD* dq = dp;
      for (i64 k = 0; k < n; ++k, yq += ys, dq += ds)
        s += bwd_term<C, LOG>(LOG ? C(0) : to_compute<C>(*yq), to_compute<C>(*dq));
    }
    // lanes of a warp with equal tx: xor over the lane bits above TX
    for (int off = TX; off < 32; off <<= 1) s += shfl_xor(s, off);
    if (lane < TX) red[warp * 32 + lane] = s;
    __syncthreads();
    if (WARPS > 1) {
      s = C(0);
      for (int w = 0; w < WARPS; ++w) s += red[w * 32 + tx];
    }
    __syncthreads();
    if (in_regs) {
#pragma unroll
      for (int k = 0; k < CAP; ++k)
        if (k < n) {
          if (LOG) yv[k] = to_compute<C>(yp[k * ys]);
          xp[k * xs] = from_compute<U>(bwd_grad<C, LOG>(yv[k], dv[k], s));
        }
    } else {
      for (i64 k = 0; k < n; ++k, yp += ys, dp += ds, xp += xs)
        *xp = from_compute<U>(bwd_grad<C, LOG>(to_compute<C>(*yp), to_compute<C>(*dp), s));
    }
  }
}
