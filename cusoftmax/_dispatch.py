"""Launch plans: which kernel, grid and block a problem gets.

Everything that decides a launch lives here, driven by the named thresholds
below, so tests can assert the regime a shape takes and sweep every boundary.

A problem reaches the dispatcher in one of two canonical layouts:

* rows: ``R`` rows of ``L`` elements, unit stride along the row, row strides
  ``sx`` / ``sy`` (elements) for input and output;
* cols: ``(O, L, I)`` with the reduction along ``L`` and a unit-stride inner
  axis ``I`` (a non-last axis of a C-ordered array, Fortran order, ...).

Regimes for the rows layout (``algorithm="auto"``), by row length in packs
(16-byte vectors) and by how many rows there are:

==========  ==============================================================
warp        row fits in one warp's registers (<= 32 lanes x REG_ELEMS)
block       row fits in one block's registers (<= 1024 threads x REG_ELEMS)
cluster     sm_90+: row fits in a cluster of <= 8 blocks' registers
split       few rows (< FEW_ROWS_PER_SM x SMs) too long for one block:
            each row split over many blocks, (max, sum) partials merged
stream      anything longer: the online two-pass stream, one block per row
==========  ==============================================================

``algorithm="naive" | "safe" | "online"`` always take ``stream`` with the
corresponding pass structure (the paper's Algorithms 1-3).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy

# ----------------------------------------------------------------------------
# Named thresholds
# ----------------------------------------------------------------------------
#: Bytes moved by one vector access.
VECTOR_BYTES = 16
#: Elements of a row one thread keeps in registers, float / double compute.
REG_ELEMS = {4: 32, 8: 16}
#: Warp kernel block size (4 warps).
WARP_KERNEL_THREADS = 128
#: Largest block of the block / cluster kernels.
MAX_BLOCK_THREADS = 1024
#: Smallest block of the block kernel.
MIN_BLOCK_THREADS = 128
#: Largest portable thread-block cluster.
MAX_CLUSTER = 8
#: Threads per block of the cluster kernel (1024 when a row needs it).
CLUSTER_THREADS = 512
#: Rows below FEW_ROWS_PER_SM x SMs count as "few": long rows are then split
#: across blocks so the whole GPU works on them.
FEW_ROWS_PER_SM = 1
#: Each split block streams at least this many packs (keeps partials few).
SPLIT_MIN_PACKS = 256
#: Target blocks per SM for the split regime.
SPLIT_BLOCKS_PER_SM = 4
#: Stream / split kernels: threads per block and packs in flight per thread.
STREAM_THREADS = 512
STREAM_UNROLL = 4
SPLIT_THREADS = 256
#: Column kernel: elements per thread in registers, default block.
COLS_CAP = 16
COLS_THREADS = 256
#: Grid-stride kernels launch at most this many blocks per SM.
MAX_BLOCKS_PER_SM = 32
#: Allowed "packs per thread" values (template instantiations): a need is
#: rounded up to the next of these.
NP_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)

ALGORITHMS = ("auto", "naive", "safe", "online")
_ALGO_ID = {"naive": "ALGO_NAIVE", "safe": "ALGO_SAFE", "online": "ALGO_ONLINE"}

#: C type names of the storage dtypes.
CTYPE = {"float16": "f16_t", "bfloat16": "bf16_t", "float32": "float", "float64": "double"}


@dataclass(frozen=True)
class DeviceInfo:
    """What the dispatcher needs to know about a GPU."""
    sm_count: int
    cc: int  # compute capability, e.g. 90

    @property
    def has_clusters(self) -> bool:
        return self.cc >= 90


@dataclass(frozen=True)
class LaunchPlan:
    """One or two kernel launches for a problem.

    ``kernel``/``grid``/``block`` is the main launch; the split regime has a
    first launch (``pre_kernel``, ``pre_grid``) that writes ``ws_elems``
    workspace values of ``ws_dtype``.
    """
    regime: str
    source: str
    kernel: str
    grid: tuple
    block: tuple
    pack: int = 1
    pre_kernel: Optional[str] = None
    pre_grid: Optional[tuple] = None
    ws_elems: int = 0
    ws_dtype: str = "float32"
    extra: tuple = ()  # trailing scalar kernel arguments

    def kernels(self):
        """Name expressions this plan launches (for compile checks)."""
        return [k for k in (self.pre_kernel, self.kernel) if k]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _ladder(n: int) -> int:
    for v in NP_LADDER:
        if n <= v:
            return v
    raise ValueError(n)


def compute_itemsize(in_dtype: str, out_dtype: str) -> int:
    """8 if the arithmetic is double (either side float64), else 4."""
    return 8 if "float64" in (in_dtype, out_dtype) else 4


def pack_width(in_dtype: str, out_dtype: str) -> int:
    """Elements per vector access for this dtype pair."""
    isz = max(numpy.dtype(_np_name(in_dtype)).itemsize, numpy.dtype(_np_name(out_dtype)).itemsize)
    return VECTOR_BYTES // isz


def _np_name(d: str) -> str:
    return "uint16" if d == "bfloat16" else d


def reg_elems(in_dtype: str, out_dtype: str) -> int:
    return REG_ELEMS[compute_itemsize(in_dtype, out_dtype)]


def row_thresholds(in_dtype: str, out_dtype: str, dev: DeviceInfo, aligned: bool = True) -> dict:
    """Largest row length (elements) of each on-chip regime, for tests/docs.

    With ``aligned=False`` a row may start mid-vector, costing up to
    ``pack - 1`` elements of capacity.
    """
    pack = pack_width(in_dtype, out_dtype) if aligned else 1
    np_max = reg_elems(in_dtype, out_dtype) // pack
    out = {
        "warp": 32 * np_max * pack,
        "block": MAX_BLOCK_THREADS * np_max * pack,
    }
    if dev.has_clusters:
        out["cluster"] = MAX_CLUSTER * MAX_BLOCK_THREADS * np_max * pack
    out["few_rows"] = FEW_ROWS_PER_SM * dev.sm_count
    return out


def plan_rows(rows: int, L: int, in_dtype: str, out_dtype: str, log: bool, dev: DeviceInfo,
              algorithm: str = "auto", vector_ok: bool = True, mis_possible: bool = False) -> LaunchPlan:
    """Plan for ``rows`` rows of ``L`` contiguous elements.

    ``vector_ok``: input and output rows share their misalignment modulo the
    pack width (else every access is scalar). ``mis_possible``: some row does
    not start on a vector boundary (costs one pack of capacity).
    """
    T, U = CTYPE[in_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    pack = pack_width(in_dtype, out_dtype) if vector_ok else 1
    np_max = reg_elems(in_dtype, out_dtype) // pack
    packs = _cdiv(L + (pack - 1 if (mis_possible and pack > 1) else 0), pack)
    src = "softmax.cu"
    sms = dev.sm_count

    if algorithm != "auto":
        # the paper's streaming forms, one block per row
        k = f"softmax_stream<{T}, {U}, {LG}, {_ALGO_ID[algorithm]}, {pack}, {STREAM_UNROLL}, {STREAM_THREADS}>"
        return LaunchPlan("stream", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (STREAM_THREADS,), pack)

    # warp: LANES lanes per row, NP packs per lane
    if packs <= 32 * np_max:
        lanes = min(32, _next_pow2(packs))
        np_ = _ladder(_cdiv(packs, lanes))
        rows_per_block = WARP_KERNEL_THREADS // 32 * (32 // lanes)
        grid = min(_cdiv(rows, rows_per_block), sms * MAX_BLOCKS_PER_SM)
        k = f"softmax_warp<{T}, {U}, {LG}, {pack}, {np_}, {lanes}>"
        return LaunchPlan("warp", src, k, (grid,), (WARP_KERNEL_THREADS,), pack)

    # block: one block per row, row in registers; aim at >= half-full threads
    if packs <= MAX_BLOCK_THREADS * np_max:
        threads = min(MAX_BLOCK_THREADS, max(MIN_BLOCK_THREADS, _next_pow2(_cdiv(packs, np_max))))
        np_ = _ladder(_cdiv(packs, threads))
        k = f"softmax_block<{T}, {U}, {LG}, {pack}, {np_}, {threads}>"
        return LaunchPlan("block", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (threads,), pack)

    few = rows < FEW_ROWS_PER_SM * sms

    # cluster: a row spread over the registers of up to 8 blocks
    if dev.has_clusters and packs <= MAX_CLUSTER * MAX_BLOCK_THREADS * np_max:
        threads = CLUSTER_THREADS
        if packs > MAX_CLUSTER * threads * np_max:
            threads = MAX_BLOCK_THREADS
        cluster = next(c for c in (2, 4, 8) if packs <= c * threads * np_max)
        np_ = _ladder(_cdiv(packs, cluster * threads))
        k = f"softmax_cluster<{T}, {U}, {LG}, {pack}, {np_}, {threads}, {cluster}>"
        nclusters = min(rows, max(1, (sms * MAX_BLOCKS_PER_SM) // cluster))
        return LaunchPlan("cluster", src, k, (nclusters * cluster,), (threads,), pack)

    # split: few long rows, each over `splits` blocks (two launches)
    if few:
        cap = max(1, _cdiv(packs, SPLIT_MIN_PACKS))
        splits = max(1, min(cap, _cdiv(SPLIT_BLOCKS_PER_SM * sms, rows)))
        pps = _cdiv(packs, splits)
        splits = _cdiv(packs, pps)
        cdt = "float64" if compute_itemsize(in_dtype, out_dtype) == 8 else "float32"
        C = CTYPE[cdt]
        pre = f"softmax_split_partial<{T}, {C}, {pack}, {STREAM_UNROLL}, {SPLIT_THREADS}>"
        k = f"softmax_split_finish<{T}, {U}, {LG}, {pack}, {STREAM_UNROLL}, {SPLIT_THREADS}>"
        return LaunchPlan("split", src, k, (splits, rows), (SPLIT_THREADS,), pack,
                          pre_kernel=pre, pre_grid=(splits, rows), ws_elems=2 * rows * splits,
                          ws_dtype=cdt, extra=(pps,))

    # stream: online two-pass, one block per row
    k = f"softmax_stream<{T}, {U}, {LG}, ALGO_ONLINE, {pack}, {STREAM_UNROLL}, {STREAM_THREADS}>"
    return LaunchPlan("stream", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (STREAM_THREADS,), pack)


def plan_cols(O: int, L: int, I: int, in_dtype: str, out_dtype: str, log: bool,
              dev: DeviceInfo) -> LaunchPlan:
    """Plan for the (O, L, I) layout, reduction along L, unit-stride I."""
    T, U = CTYPE[in_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    # lanes along I: a full 128-byte line when there is enough parallelism,
    # down to one 32-byte sector per row of the tile when tiles are few
    tx = min(32, _next_pow2(I))
    min_tx = min(tx, max(1, 32 // isz))
    while tx > min_tx and O * _cdiv(I, tx) < 2 * dev.sm_count:
        tx //= 2
    threads = COLS_THREADS
    while threads < MAX_BLOCK_THREADS and L > (threads // tx) * COLS_CAP:
        threads *= 2
    tiles = O * _cdiv(I, tx)
    grid = min(tiles, dev.sm_count * MAX_BLOCKS_PER_SM)
    k = f"softmax_cols<{T}, {U}, {LG}, {COLS_CAP}, {threads}>"
    return LaunchPlan("cols", "softmax.cu", k, (grid,), (threads,), 1, extra=(tx,))


def all_forward_kernels(dev: DeviceInfo) -> list[tuple[str, str]]:
    """Every (source, name expression) the forward dispatcher can choose on
    ``dev``: used by the compile check. Enumerated by running the dispatcher
    over row lengths at and around every threshold, all dtype pairs, both
    flags, aligned or not, so it stays in step with plan_rows/plan_cols."""
    dts = ("float16", "bfloat16", "float32", "float64")
    found: dict[tuple[str, str], None] = {}
    for ti in dts:
        for to in dts:
            for log in (False, True):
                for vec in (True, False):
                    pack = pack_width(ti, to) if vec else 1
                    np_max = reg_elems(ti, to) // pack
                    Ls = set()
                    for lanes_cap in (32, MAX_BLOCK_THREADS, MAX_CLUSTER * MAX_BLOCK_THREADS,
                                      MAX_CLUSTER * CLUSTER_THREADS, 2 * CLUSTER_THREADS,
                                      4 * CLUSTER_THREADS):
                        for npk in range(1, np_max + 1):
                            base = lanes_cap * npk * pack
                            Ls.update((base - 1, base, base + 1))
                    for lanes in (1, 2, 4, 8, 16, 32):
                        for npk in range(1, np_max + 1):
                            base = lanes * npk * pack
                            Ls.update((max(1, base - 1), base, base + 1))
                    for t in (128, 256, 512, 1024):
                        for npk in range(1, np_max + 1):
                            base = t * npk * pack
                            Ls.update((base - 1, base, base + 1))
                    Ls.add(10 ** 7)
                    for L in sorted(Ls):
                        for rows in (1, 10 ** 6):
                            for mis in (False, True):
                                for algo in ALGORITHMS:
                                    p = plan_rows(rows, L, ti, to, log, dev, algo, vec, mis)
                                    for kname in p.kernels():
                                        found[(p.source, kname)] = None
                    for threads in (256, 512, 1024):
                        k = f"softmax_cols<{CTYPE[ti]}, {CTYPE[to]}, {'true' if log else 'false'}, {COLS_CAP}, {threads}>"
                        found[("softmax.cu", k)] = None
    return list(found)
