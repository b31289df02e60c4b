// cusoftmax/kernels/common.cuh -- device code shared by every operation family.
//
// Header-free on purpose: nothing here includes a CUDA toolkit header, so NVRTC
// compiles the kernels with no include path (the no-GPU compile check relies on
// that) and the loader can inline this file into each source, which makes the
// compiled-module cache key cover it.
//
// Contents
//   * storage types (f16_t, bf16_t) and conversions to/from the compute type;
//   * Pack<T, N>: an N-element vector moved with one 16/8/4/2-byte access;
//   * MD: the online normaliser's (max, sum) pair and its associative merge
//     (Milakov & Gimelshein 2018, eq. 3), guarded against -inf - (-inf);
//   * warp / block all-reduce of MD;
//   * fast exp/log for float and double.
#pragma once

#define CSM_DEVICE __device__ __forceinline__

typedef long long i64;
typedef unsigned long long u64;

// ----------------------------------------------------------------------------
// Storage types. 16-bit floats are kept as raw bits and converted with PTX, so
// no cuda_fp16.h / cuda_bf16.h is needed.
// ----------------------------------------------------------------------------
struct __align__(2) f16_t { unsigned short bits; };
struct __align__(2) bf16_t { unsigned short bits; };

template <typename A, typename B> struct IsSame { static constexpr bool value = false; };
template <typename A> struct IsSame<A, A> { static constexpr bool value = true; };

template <typename T> struct ComputeOf { typedef float type; };
template <> struct ComputeOf<double> { typedef double type; };

template <typename C, typename T> CSM_DEVICE C to_compute(T v);
template <> CSM_DEVICE float to_compute<float, float>(float v) { return v; }
template <> CSM_DEVICE float to_compute<float, double>(double v) { return (float)v; }
template <> CSM_DEVICE double to_compute<double, double>(double v) { return v; }
template <> CSM_DEVICE double to_compute<double, float>(float v) { return (double)v; }
template <> CSM_DEVICE float to_compute<float, bf16_t>(bf16_t v) {
  return __int_as_float(((unsigned)v.bits) << 16);
}
template <> CSM_DEVICE float to_compute<float, f16_t>(f16_t v) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(v.bits));
  return r;
}
template <> CSM_DEVICE double to_compute<double, bf16_t>(bf16_t v) {
  return (double)to_compute<float, bf16_t>(v);
}
template <> CSM_DEVICE double to_compute<double, f16_t>(f16_t v) {
  return (double)to_compute<float, f16_t>(v);
}

// to_compute with a float16 value taken as the low half of a 32-bit register:
// the same conversion (bit for bit), but ptxas allocates fewer registers
// around it: softmax_cols_cl's float16 scalars at NR 32 fit 80 registers (3
// blocks an SM) only so. Elsewhere the plain form: in every row kernel it
// gave the same bits at -4% .. +5% of the time, and the strided sync / skewed
// cluster kernels were 1-2% slower (H100, kernels/f16_wide.txt of
// bench/results/nvidia-h100-80gb-hbm3).
template <typename C, typename T> CSM_DEVICE C to_compute_w(T v) { return to_compute<C>(v); }
template <> CSM_DEVICE float to_compute_w<float, f16_t>(f16_t v) {
  float r;
  const unsigned u = v.bits;
  asm("{.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.f32.f16 %0, lo;}" : "=f"(r) : "r"(u));
  return r;
}

// to_compute_w where W, else to_compute
template <bool W, typename C, typename T> CSM_DEVICE C to_compute_as(T v) {
  if constexpr (W) return to_compute_w<C>(v);
  else return to_compute<C>(v);
}

template <typename T, typename C> CSM_DEVICE T from_compute(C v);
template <> CSM_DEVICE float from_compute<float, float>(float v) { return v; }
template <> CSM_DEVICE double from_compute<double, float>(float v) { return (double)v; }
template <> CSM_DEVICE double from_compute<double, double>(double v) { return v; }
template <> CSM_DEVICE float from_compute<float, double>(double v) { return (float)v; }
template <> CSM_DEVICE bf16_t from_compute<bf16_t, float>(float v) {
  // round to nearest even in one instruction (sm_80; NaN gives a quiet NaN),
  // as convert_pack's cvt.rn.bf16x2.f32 (the integer form took six
  // instructions and a select an element)
  bf16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(v));
  return r;
}
template <> CSM_DEVICE f16_t from_compute<f16_t, float>(float v) {
  f16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(v));
  return r;
}
template <> CSM_DEVICE bf16_t from_compute<bf16_t, double>(double v) {
  return from_compute<bf16_t, float>((float)v);
}
template <> CSM_DEVICE f16_t from_compute<f16_t, double>(double v) {
  f16_t r;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(r.bits) : "d"(v));
  return r;
}

// ----------------------------------------------------------------------------
// Numeric helpers for the compute type.
// ----------------------------------------------------------------------------
// e^x in double without branches (libdevice's exp branches per call for
// |x| > 708; a thread holding many values then carries many live branches):
// x = k ln2 + r, |r| <= ln2 / 2, e^r by libdevice's polynomial, times 2^k in
// two factors so overflow (inf) and underflow (subnormals, 0) come out right.
// x is clamped to +-1080 (k within +-1559); NaN passes the comparisons.
CSM_DEVICE double exp_f64(double x) {
  x = x < -1080.0 ? -1080.0 : (x > 1080.0 ? 1080.0 : x);
  const double shift = 6755399441055744.0;  // 1.5 * 2^52: adds round to integer
  const double t = fma(x, 1.4426950408889634, shift);
  const int k = (int)(unsigned)__double_as_longlong(t);
  const double kd = t - shift;
  double r = fma(kd, __longlong_as_double(0xBFE62E42FEFA39EFull), x);  // -ln2 hi
  r = fma(kd, __longlong_as_double(0xBC7ABC9E3B39803Full), r);          // -ln2 lo
  double p = __longlong_as_double(0x3E5ADE1569CE2BDFull);
  p = fma(p, r, __longlong_as_double(0x3E928AF3FCA213EAull));
  p = fma(p, r, __longlong_as_double(0x3EC71DEE62401315ull));
  p = fma(p, r, __longlong_as_double(0x3EFA01997C89EB71ull));
  p = fma(p, r, __longlong_as_double(0x3F2A01A014761F65ull));
  p = fma(p, r, __longlong_as_double(0x3F56C16C1852B7AFull));
  p = fma(p, r, __longlong_as_double(0x3F81111111122322ull));
  p = fma(p, r, __longlong_as_double(0x3FA55555555502A1ull));
  p = fma(p, r, __longlong_as_double(0x3FC5555555555511ull));
  p = fma(p, r, __longlong_as_double(0x3FE000000000000Bull));
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  const int k1 = k >> 1, k2 = k - k1;
  p *= __longlong_as_double((long long)(k1 + 1023) << 52);
  return p * __longlong_as_double((long long)(k2 + 1023) << 52);
}

template <typename C> struct Num;
template <> struct Num<float> {
  static CSM_DEVICE float neg_inf() { return __int_as_float(0xff800000); }
  static CSM_DEVICE float nan() { return __int_as_float(0x7fffffff); }
  static CSM_DEVICE float max(float a, float b) { return fmaxf(a, b); }
  static CSM_DEVICE float min(float a, float b) { return fminf(a, b); }
  // max that propagates NaN (fmaxf returns the other operand)
  static CSM_DEVICE float max_nan(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
  // e^(d) for d = x - m <= 0, as one ex2.approx (relative error ~2 ulp);
  // the subtraction is done first so large |x| loses no precision.
  static CSM_DEVICE float exp(float d) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * 1.4426950408889634f));
    return r;
  }
  // natural log via lg2.approx (abs. error ~2^-22 of log2): used once per
  // row for log-softmax's log d, where d >= 1
  static CSM_DEVICE float log(float v) {
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r * 0.6931471805599453f;
  }
  static CSM_DEVICE float rcp(float v) { return 1.0f / v; }
};
template <> struct Num<double> {
  static CSM_DEVICE double neg_inf() { return __longlong_as_double(0xfff0000000000000ull); }
  static CSM_DEVICE double nan() { return __longlong_as_double(0x7fffffffffffffffull); }
  static CSM_DEVICE double max(double a, double b) { return fmax(a, b); }
  static CSM_DEVICE double min(double a, double b) { return fmin(a, b); }
  static CSM_DEVICE double max_nan(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }
  // branch-free polynomial exp (libdevice's exp makes ptxas spill)
  static CSM_DEVICE double exp(double d) { return exp_f64(d); }
  static CSM_DEVICE double log(double v) { return ::log(v); }
  static CSM_DEVICE double rcp(double v) { return 1.0 / v; }
};

// ----------------------------------------------------------------------------
// Vector packs: N elements of T moved with one access of sizeof(T) * N bytes.
// ----------------------------------------------------------------------------
template <int BYTES> struct RawVec;
template <> struct RawVec<16> { typedef uint4 type; };
template <> struct RawVec<8> { typedef uint2 type; };
template <> struct RawVec<4> { typedef unsigned type; };
template <> struct RawVec<2> { typedef unsigned short type; };
template <> struct RawVec<1> { typedef unsigned char type; };

template <typename T, int N> struct Pack {
  typedef typename RawVec<sizeof(T) * N>::type raw_t;
  union {
    raw_t raw;
    T v[N];
  };
};

// Aligned vector load / store. `p` must be aligned to sizeof(T) * N.
template <typename T, int N> CSM_DEVICE Pack<T, N> load_pack(const T* p) {
  Pack<T, N> r;
  r.raw = *reinterpret_cast<const typename Pack<T, N>::raw_t*>(p);
  return r;
}
// Load of data read once (the top-k kernels' streams): 16-byte packs marked
// evict-first in L2 (and not allocated in L1), so that once their lines have
// displaced what the L2 held before, the stream displaces its own clean lines
// rather than further lines of that content. An L2 full of dirty lines (a
// preceding write, e.g. the benchmark's memset flush) is then written back
// only in part: H100, a pure read of 33 MB after a 256 MiB memset takes 17.0
// instead of 19.1 us, 67 MB 29.0 instead of 33.6; 8 and 268 MB and any read
// after a read are unchanged (kernels/evict_first.txt). `pol` comes from
// l2_evict_first(). Other widths, and before sm_80: a plain load.
CSM_DEVICE u64 l2_evict_first() {
  u64 pol = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
#endif
  return pol;
}
template <typename T, int N> CSM_DEVICE Pack<T, N> load_pack_once(const T* p, u64 pol) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) * N == 16) {
    Pack<T, N> r;
    // volatile: kept under the caller's bounds checks, in program order
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(r.raw.x), "=r"(r.raw.y), "=r"(r.raw.z), "=r"(r.raw.w)
        : "l"(p), "l"(pol));
    return r;
  }
#endif
  (void)pol;
  return load_pack<T, N>(p);
}
template <typename T, int N> CSM_DEVICE void store_pack(T* p, const Pack<T, N>& v) {
  *reinterpret_cast<typename Pack<T, N>::raw_t*>(p) = v.raw;
}

// Store of the strided-axis (cols) kernels: 16-byte packs without L1
// allocation (st.global.L1::no_allocate). H100: plain stores of rows that do
// not start on 128-byte lines (a 128-byte tile row then covers parts of two
// lines: e.g. (1000, 1000) float32 reduced over axis 0) cost those kernels up
// to 2.4x; without L1 allocation float32 (1000, 3000) takes 18 us instead of
// 32 and (5000, 3000) 61 instead of 113 (tools/ab_cols.py,
// kernels/cols_store_hint.txt). Other widths, and before sm_90 (not
// measured there): a plain store.
template <typename T, int N> CSM_DEVICE void store_pack_cols(T* p, const Pack<T, N>& v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool HINT = sizeof(T) * N == 16;
#else
  constexpr bool HINT = false;
#endif
  if constexpr (HINT) {
    const unsigned* w = reinterpret_cast<const unsigned*>(&v.raw);
    asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3])
                 : "memory");
  } else {
    store_pack<T, N>(p, v);
  }
}

// Elements of a row that a pack covers start at (pack_index * N - mis), where
// `mis` is the row's misalignment in elements (row start address modulo the
// pack width). Packs overlapping [0, L) are loaded whole (an aligned access
// never crosses an allocation's 256-byte granule); only in-row elements are
// used, and stores outside [0, L) are skipped.
template <typename T, int N>
CSM_DEVICE int row_misalignment(const T* row) {
  return (int)((reinterpret_cast<u64>(row) / sizeof(T)) % (u64)N);
}

// Load pack `p` of a row (superset coordinates) into compute values; elements
// outside [0, L) become `fill`.
template <typename C, typename T, int N>
CSM_DEVICE void load_row_pack(const T* row, i64 p, int mis, i64 L, C fill, C* out) {
  const i64 c0 = p * N - mis;
  if (N == 1) {
    out[0] = (c0 < L) ? to_compute<C>(row[c0]) : fill;
    return;
  }
  if (c0 >= L) {
#pragma unroll
    for (int e = 0; e < N; ++e) out[e] = fill;
    return;
  }
  Pack<T, N> pk = load_pack<T, N>(row + c0);
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const i64 c = c0 + e;
    out[e] = (c >= 0 && c < L) ? to_compute<C>(pk.v[e]) : fill;
  }
}

// Convert N compute values into a storage pack; 16-bit outputs from float
// go two at a time (cvt.rn.{bf16x2,f16x2}.f32, round to nearest even).
template <typename U, typename C, int N>
CSM_DEVICE void convert_pack(const C* vals, Pack<U, N>& pk) {
  if constexpr ((sizeof(U) == 2) && (sizeof(C) == 4) && (N % 2 == 0)) {
#pragma unroll
    for (int e = 0; e < N; e += 2) {
      unsigned r;
      if constexpr (IsSame<U, bf16_t>::value) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(vals[e + 1]), "f"(vals[e]));
      } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(vals[e + 1]), "f"(vals[e]));
      }
      pk.v[e].bits = (unsigned short)(r & 0xffffu);
      pk.v[e + 1].bits = (unsigned short)(r >> 16);
    }
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) pk.v[e] = from_compute<U>(vals[e]);
  }
}

// Store pack `p` of a row; the output row has the same misalignment as the
// input row (the dispatcher guarantees it, or picks N == 1).
template <typename U, typename C, int N>
CSM_DEVICE void store_row_pack(U* row, i64 p, int mis, i64 L, const C* vals) {
  const i64 c0 = p * N - mis;
  if (N == 1) {
    if (c0 < L) row[c0] = from_compute<U>(vals[0]);
    return;
  }
  if (c0 >= L) return;
  if (c0 >= 0 && c0 + N <= L) {
    Pack<U, N> pk;
    convert_pack<U, C, N>(vals, pk);
    store_pack<U, N>(row + c0, pk);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const i64 c = c0 + e;
      if (c >= 0 && c < L) row[c] = from_compute<U>(vals[e]);
    }
  }
}

// Packs a row of length L with misalignment `mis` spans in superset coordinates.
template <int N> CSM_DEVICE i64 row_packs(i64 L, int mis) { return (L + mis + N - 1) / N; }

// ----------------------------------------------------------------------------
// The online normaliser: m = running max, d = sum_j e^(x_j - m).
// merge((ma, da), (mb, db)) = (m, da e^(ma - m) + db e^(mb - m)), m = max(ma, mb).
// When a side's max equals m its scale is exactly 1: this avoids
// e^(-inf - (-inf)) = NaN for rows (or slices) that are entirely -inf, whose
// d is 0. A NaN anywhere reaches d (e^(NaN) = NaN), so the row becomes NaN;
// +inf gives e^(inf - inf) = NaN in d as well, as scipy does.
// ----------------------------------------------------------------------------
template <typename C> struct MD {
  C m, d;
};

template <typename C> CSM_DEVICE MD<C> md_identity() {
  MD<C> r;
  r.m = Num<C>::neg_inf();
  r.d = C(0);
  return r;
}

template <typename C> CSM_DEVICE MD<C> md_merge(MD<C> a, MD<C> b) {
  MD<C> r;
  r.m = Num<C>::max(a.m, b.m);
  const C sa = (a.m == r.m) ? C(1) : Num<C>::exp(a.m - r.m);
  const C sb = (b.m == r.m) ? C(1) : Num<C>::exp(b.m - r.m);
  r.d = a.d * sa + b.d * sb;
  return r;
}

// Merge N partials p[0], p[stride], ... in that order, max first: one
// exponential a partial (md_merge's sequence takes two a step). All maxima
// -inf gives (-inf, 0); a NaN maximum makes the sum NaN.
template <typename C, int N> CSM_DEVICE MD<C> md_merge_all(const MD<C>* p, int stride) {
  MD<C> r;
  r.m = p[0].m;
#pragma unroll
  for (int q = 1; q < N; ++q) r.m = Num<C>::max(r.m, p[q * stride].m);
  C d[2] = {C(0), C(0)};
#pragma unroll
  for (int q = 0; q < N; ++q) {
    const MD<C> t = p[q * stride];
    d[q % 2] += t.m == r.m ? t.d : t.d * Num<C>::exp(t.m - r.m);
  }
  r.d = d[0] + d[1];
  return r;
}

// (max, sum) of `n` values held by one thread, as a partial: max first, then
// one exp per value. Values that are -inf contribute 0.
template <typename C, int NV> CSM_DEVICE MD<C> md_of_values(const C* v) {
  C m = Num<C>::neg_inf();
#pragma unroll
  for (int i = 0; i < NV; ++i) m = Num<C>::max(m, v[i]);
  C d = C(0);
  if (m != Num<C>::neg_inf()) {
#pragma unroll
    for (int i = 0; i < NV; ++i) d += Num<C>::exp(v[i] - m);
  } else {
    // fmax drops NaN: the values are all -inf (d = 0) or include a NaN
#pragma unroll
    for (int i = 0; i < NV; ++i)
      if (v[i] != v[i]) d = Num<C>::nan();
  }
  MD<C> r;
  r.m = m;
  r.d = d;
  // a NaN next to finite values reaches d through e^(NaN - m)
  return r;
}

// Softmax variant of md_of_values that keeps the exponentials: on return
// v[i] = e^(v[i] - m_t) (the thread's own max m_t) and the partial is
// (m_t, sum v[i]); the caller later multiplies by thread_scale(), so every
// element costs one exp. A thread whose values are all -inf gets zeros.
template <typename C, int NV> CSM_DEVICE MD<C> md_exp_inplace(C* v) {
  C m = Num<C>::neg_inf();
#pragma unroll
  for (int i = 0; i < NV; ++i) m = Num<C>::max(m, v[i]);
  C d = C(0);
  if (m != Num<C>::neg_inf()) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      v[i] = Num<C>::exp(v[i] - m);
      d += v[i];
    }
  } else {  // all -inf (zeros) or NaN among -inf (fmax dropped it): keep the NaN
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const bool isnan = v[i] != v[i];
      v[i] = isnan ? v[i] : C(0);
      if (isnan) d = v[i];
    }
  }
  MD<C> r;
  r.m = m;
  r.d = d;
  return r;
}

// Factor turning a thread's kept exponentials e^(x - m_t) into probabilities
// e^(x - M) / D for the row's (M, D). NaN/+inf rows have D = NaN -> NaN; an
// all -inf row has D = 0 -> 0 * inf = NaN, as the reference.
template <typename C> CSM_DEVICE C thread_scale(C m_t, MD<C> row) {
  const C f = (m_t == row.m) ? C(1) : Num<C>::exp(m_t - row.m);
  return f / row.d;
}

// Fold NV more values into a running partial (one rescale per group).
template <typename C, int NV> CSM_DEVICE MD<C> md_update(MD<C> acc, const C* v) {
  return md_merge(acc, md_of_values<C, NV>(v));
}

// Fold NV values into a running (max, sum) in place: the group's max by a
// tree, one rescale of the sum per group, one exp per value (the cheap form
// for streaming loops). All -inf so far: m = -inf and the exps are taken
// against 0, so -inf values add 0; a NaN reaches d through e^(NaN - base);
// +inf gives e^(inf - inf) = NaN, as the reference.
template <typename C, int NV> CSM_DEVICE void md_accumulate(MD<C>& acc, const C* v) {
  C t[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) t[i] = v[i];
#pragma unroll
  for (int w = 1; w < NV; w *= 2)
#pragma unroll
    for (int i = 0; i + w < NV; i += 2 * w) t[i] = Num<C>::max(t[i], t[i + w]);
  const C nm = Num<C>::max(acc.m, t[0]);
  const C base = (nm == Num<C>::neg_inf()) ? C(0) : nm;
#pragma unroll
  for (int i = 0; i < NV; ++i) t[i] = Num<C>::exp(v[i] - base);
#pragma unroll
  for (int w = 1; w < NV; w *= 2)
#pragma unroll
    for (int i = 0; i + w < NV; i += 2 * w) t[i] += t[i + w];
  acc.d = acc.d * Num<C>::exp(acc.m - base) + t[0];
  acc.m = nm;
}

// Fold N packs of VEC columns (N rows of the same columns) into the columns'
// running (max, sum): md[e] takes element e of every pack (md_accumulate).
template <typename C, int N, typename T, int VEC>
CSM_DEVICE void md_accumulate_packs(MD<C>* md, const Pack<T, VEC>* pk) {
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    C v[N];
#pragma unroll
    for (int u = 0; u < N; ++u) v[u] = to_compute<C>(pk[u].v[e]);
    md_accumulate<C, N>(md[e], v);
  }
}

// ----------------------------------------------------------------------------
// Shuffles and reductions.
// ----------------------------------------------------------------------------
CSM_DEVICE float shfl_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
CSM_DEVICE double shfl_xor(double v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

// All-reduce over groups of WIDTH consecutive lanes (WIDTH a power of two <= 32).
template <typename C, int WIDTH> CSM_DEVICE MD<C> warp_allreduce_md(MD<C> v) {
#pragma unroll
  for (int off = WIDTH / 2; off > 0; off >>= 1) {
    MD<C> o;
    o.m = shfl_xor(v.m, off);
    o.d = shfl_xor(v.d, off);
    v = md_merge(v, o);
  }
  return v;
}

template <typename C, int WIDTH> CSM_DEVICE C warp_allreduce_sum(C v) {
#pragma unroll
  for (int off = WIDTH / 2; off > 0; off >>= 1) v += shfl_xor(v, off);
  return v;
}

template <typename C, int WIDTH> CSM_DEVICE C warp_allreduce_max(C v) {
#pragma unroll
  for (int off = WIDTH / 2; off > 0; off >>= 1) v = Num<C>::max_nan(v, shfl_xor(v, off));
  return v;
}

// Block all-reduce of an MD pair; THREADS is a multiple of 32. `smem` holds
// THREADS / 32 pairs. Ends with a barrier, so the caller may reuse smem.
template <typename C, int THREADS>
CSM_DEVICE MD<C> block_allreduce_md(MD<C> v, MD<C>* smem) {
  constexpr int WARPS = THREADS / 32;
  v = warp_allreduce_md<C, 32>(v);
  if (WARPS == 1) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  MD<C> r = (lane < WARPS) ? smem[lane] : md_identity<C>();
  r = warp_allreduce_md<C, 32>(r);
  __syncthreads();
  return r;
}

template <typename C, int THREADS> CSM_DEVICE C block_allreduce_sum(C v, C* smem) {
  constexpr int WARPS = THREADS / 32;
  v = warp_allreduce_sum<C, 32>(v);
  if (WARPS == 1) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  C r = (lane < WARPS) ? smem[lane] : C(0);
  r = warp_allreduce_sum<C, 32>(r);
  __syncthreads();
  return r;
}

template <typename C, int THREADS> CSM_DEVICE C block_allreduce_max(C v, C* smem) {
  constexpr int WARPS = THREADS / 32;
  v = warp_allreduce_max<C, 32>(v);
  if (WARPS == 1) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  C r = (lane < WARPS) ? smem[lane] : Num<C>::neg_inf();
  r = warp_allreduce_max<C, 32>(r);
  __syncthreads();
  return r;
}

// ----------------------------------------------------------------------------
// cp.async (sm_80+): 16-byte global -> shared copies that bypass registers
// (LDGSTS), grouped and awaited by group count.
// ----------------------------------------------------------------------------
CSM_DEVICE void cp_async16(void* smem, const void* gmem) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
CSM_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> CSM_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// ----------------------------------------------------------------------------
// Barrier among the `n` blocks that share a row in a single-launch split
// kernel (all of them co-resident: the dispatcher launches no more blocks than
// SMs). `cnt[0]` counts arrivals, `cnt[1]` departures; it starts at zero and
// the last block to leave resets it, so the next launch on the stream finds
// it zero again. Thread 0 of each block calls arrive (after publishing its
// partial), then every thread may read the partials; after reading, thread 0
// calls depart.
// ----------------------------------------------------------------------------
CSM_DEVICE unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
CSM_DEVICE void row_barrier_arrive(unsigned* cnt, unsigned n, unsigned poll_ns = 32) {
  __threadfence();  // this block's partial is visible before it is counted
  atomicAdd(cnt, 1u);
  while (ld_acquire_gpu(cnt) < n) __nanosleep(poll_ns);
}
CSM_DEVICE void row_barrier_depart(unsigned* cnt, unsigned n) {
  if (atomicAdd(cnt + 1, 1u) == n - 1) {  // every block has passed arrive: reset
    cnt[0] = 0u;
    cnt[1] = 0u;
    __threadfence();
  }
}

// Compile-time cluster shape of a kernel (nothing before sm_90, where the
// dispatcher never asks for clusters).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CSM_CLUSTER_DIMS(n) __cluster_dims__(n, 1, 1)
#else
#define CSM_CLUSTER_DIMS(n)
#endif

// ----------------------------------------------------------------------------
// Thread-block clusters (sm_90+): barrier and distributed shared memory, in
// PTX so no cooperative_groups header is needed.
// ----------------------------------------------------------------------------
CSM_DEVICE unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
CSM_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Address of `p` (this block's shared memory) in block `rank` of the cluster.
CSM_DEVICE unsigned cluster_map_shared(const void* p, unsigned rank) {
  unsigned local = (unsigned)__cvta_generic_to_shared(p);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
// ----------------------------------------------------------------------------
// mbarriers and st.async (sm_90 code: the dispatcher picks their callers on
// sm_90 only).
// ----------------------------------------------------------------------------
CSM_DEVICE unsigned csm_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
CSM_DEVICE void csm_mbar_init(u64* m) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(csm_smem_addr(m)) : "memory");
}
CSM_DEVICE void csm_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
CSM_DEVICE void csm_mbar_expect(u64* m, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(csm_smem_addr(m)), "r"(bytes)
               : "memory");
}
CSM_DEVICE void csm_mbar_arrive(u64* m) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(csm_smem_addr(m)) : "memory");
}
CSM_DEVICE void csm_mbar_wait(u64* m, unsigned parity) {
  asm volatile(
      "{\n\t.reg .pred P1;\n\tLAB_WAIT:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n\t"
      "@P1 bra DONE;\n\tbra LAB_WAIT;\n\tDONE:\n\t}" ::"r"(csm_smem_addr(m)),
      "r"(parity)
      : "memory");
}

// Distributed shared memory by st.async: the value lands in block `rank`'s
// shared memory (address `raddr` from mapa) and counts its bytes on that
// block's mbarrier (`rmbar`), whose waiters then see it. No fence and no
// cluster barrier: cluster_sync's release / acquire costs a GPU-scope
// MEMBAR (about 900 cycles a barrier on H100, tools/csm_trace.py).
CSM_DEVICE void csm_st_async(unsigned raddr, u64 v, unsigned rmbar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(raddr), "l"(v),
               "r"(rmbar)
               : "memory");
}
CSM_DEVICE void csm_st_async(unsigned raddr, unsigned v, unsigned rmbar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(raddr), "r"(v),
               "r"(rmbar)
               : "memory");
}
CSM_DEVICE void csm_st_async(unsigned raddr, MD<float> v, unsigned rmbar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(raddr),
               "f"(v.m), "f"(v.d), "r"(rmbar)
               : "memory");
}
// Waits for phase 0 of a local mbarrier fed by st.async from the cluster.
CSM_DEVICE void csm_mbar_wait_cluster(u64* m) {
  asm volatile(
      "{\n\t.reg .pred P1;\n\tLAB_WAITC:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], 0;\n\t"
      "@P1 bra DONEC;\n\tbra LAB_WAITC;\n\tDONEC:\n\t}" ::"r"((unsigned)__cvta_generic_to_shared(m))
      : "memory");
}

CSM_DEVICE float ld_shared_cluster(unsigned addr, float) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
CSM_DEVICE double ld_shared_cluster(unsigned addr, double) {
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(addr) : "memory");
  return v;
}

// The final value of one element: softmax e^(x - m) / d, or log-softmax
// (x - m) - log d. `inv_or_logd` is 1/d or log d, set once per row.
template <typename C, bool LOG> CSM_DEVICE C finish_value(C x, C m, C inv_or_logd) {
  if (LOG) return (x - m) - inv_or_logd;
  return Num<C>::exp(x - m) * inv_or_logd;
}
template <typename C, bool LOG> CSM_DEVICE C row_scale(MD<C> md) {
  return LOG ? Num<C>::log(md.d) : Num<C>::rcp(md.d);
}
