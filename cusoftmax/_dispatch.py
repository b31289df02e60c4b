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
smem        many rows of 16-224 KiB (x 8 with clusters on sm_90): rows
            staged in shared memory by cp.async, the next in flight
cluster     sm_90+: row fits in a cluster of <= 8 blocks' registers
rowsync     1 to SMs / ROWSYNC_MIN_BLOCKS long rows: one launch, each row
            over up to SMs / rows resident blocks' registers, partials
            merged after a per-row barrier
split       few rows (< FEW_ROWS_PER_SM x SMs) too long for one block:
            each row split over many blocks, (max, sum) partials merged
            by a second kernel
stream      anything longer: the online two-pass stream, one block per row
==========  ==============================================================

``algorithm="naive" | "safe" | "online"`` always take ``stream`` with the
corresponding pass structure (the paper's Algorithms 1-3).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Optional

import numpy

# ----------------------------------------------------------------------------
# Named thresholds
# ----------------------------------------------------------------------------
#: Bytes moved by one vector access.
VECTOR_BYTES = 16
#: Elements of a row one thread keeps in registers, float / double compute.
REG_ELEMS = {4: 32, 8: 8}
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
#: Rows below FEW_ROWS_PER_SM x SMs count as "few": the GPU is not filled by
#: one block per row, so rows are spread over clusters or split across blocks.
FEW_ROWS_PER_SM = 1
#: Rows below SMs / SPLIT_ROWS_DIV that exceed one block are always split.
SPLIT_ROWS_DIV = 16
#: Few 32-bit rows (below FEW_ROWS_PER_SM x SMs) too long for a block and too
#: many for every row's cluster to fit at once: from this many rows on, a
#: cluster per row in several waves instead of the split. H100 (tools/tune.py,
#: kernels/tune_few_rows*.txt), float32 softmax, split vs cluster: 64 x 128256
#: 50.4 vs 45.0-45.8 us, 64 x 262144 92.5 vs 84.8, 96 x 65536 34.4 vs 31.9,
#: 96 x 262144 124.3 vs 120.5, 128 x 65536 51.3 vs 36.3, 128 x 262144 174.7
#: vs 155.0; at 48 rows no gain (48 x 128256 34.0 vs 33.6, 48 x 262144 65.7 vs
#: 67.5). 16-bit rows keep the split (64 x 128256 bfloat16: 29.0 vs 31.6).
FEW_CLUSTER_WAVES_MIN_ROWS = 64
#: ... and few 16-bit rows of at most FEW_STREAM_MAX_PACKS_16 packs from
#: FEW_STREAM_MIN_ROWS_16 rows on stream (one block per row) instead of the
#: split. H100, bfloat16 softmax, split vs stream: 96 x 65536 25.1 vs 20.3
#: us, 96 x 128256 39.9 vs 37.5, 128 x 65536 30.1 vs 22.0, 128 x 128256 51.2
#: vs 44.0; at 64 rows the split is ahead (64 x 128256 29.0 us, the stream not
#: among the three fastest), and at 96 x 262144 too (75.2 us; the stream not
#: among the three fastest either).
FEW_STREAM_MIN_ROWS_16 = 96
FEW_STREAM_MAX_PACKS_16 = 16384
#: Warp regime: target packs per lane (two 16-byte loads in flight) for
#: 32/64-bit storage; 16-bit rows take one pack a lane and leave the warp
#: regime beyond WARP_NP_MAX_16 packs a lane.
PACKS_PER_LANE = 2
WARP_NP_MAX_16 = 2
WARP_NP_MAX_MIXED = 6
#: 32-bit rows (4-element packs): below WARP_ONE_PACK_MAX_ROWS rows a lane
#: holds one pack (twice the lanes a row); below WARP_LONG_MIN_ROWS rows,
#: rows longer than WARP_NP_FEW packs a lane leave the warp regime for the
#: block kernel, and so do log-softmax rows longer than WARP_NP_LOG packs a
#: lane below WARP_LONG_MIN_ROWS_LOG rows. Measured on H100 (tools/tune.py
#: [--log] --dtypes float32; kernels/tune_rows_f32*.txt), float32:
#: 128 columns, 1 / 64 / 4096 / 32768 rows: 32 lanes x 1 pack 4.3 / 4.6 / 6.2
#: / 16.8 us vs 16 x 2 4.8 / 5.0 / 6.6 / 17.0 (equal at 262144 rows);
#: 1024 columns, log-softmax, 1 / 64 / 512 / 2048 / 4096 rows: block 4.8-5.2 /
#: 5.0 / 6.5 / 10.0 / 16.8 us vs warp 6.3 / 7.1 / 8.1 / 11.2 / 18.5 (equal at
#: 32768); softmax 1 / 64 / 512 / 2048 rows: block 5.1 / 5.4 / 6.6 / 10.5 us vs
#: warp 5.6 / 6.2 / 7.2 / 11.0, warp ahead from 4096 rows (16.7 vs 17.0);
#: 512 columns, 1 / 64 rows: block 4.5 / 4.9 us vs warp 4.9 / 5.3, equal at
#: 512 rows, warp ahead at 4096 (log-softmax too: 10.0 vs 11.2 us).
WARP_ONE_PACK_MAX_ROWS = 65536
WARP_LONG_MIN_ROWS = 4096
WARP_LONG_MIN_ROWS_LOG = 16384
WARP_NP_FEW = 2
WARP_NP_LOG = 4
#: Block regime, log-softmax: packs a thread holds at most.
LOG_BLOCK_NP_MAX = 6
#: Block regime always up to this many packs (4096 fp32 / 16384 16-bit
#: columns); longer rows, when there are many, prefer the smem kernel.
BLOCK_FIRST_PACKS = 1024
BLOCK_FIRST_PACKS_16 = 2048
#: 16-bit rows above BLOCK_SMALL_PACKS_16 packs: PACKS_PER_THREAD_16 a thread.
BLOCK_SMALL_PACKS_16 = 512
PACKS_PER_THREAD_16 = 4
#: smem kernel: packs a block stages per row (two buffers of this many 16-byte
#: packs = 224 KiB of the 227 KiB a block may use), threads per block.
SMEM_MAX_PACKS = 7168
SMEM_THREADS = 512
#: The smem kernel's pipeline needs several rows per SM to pay off.
SMEM_MIN_ROWS_PER_SM = 6
#: Shared memory the smem kernel may fill with row stages (of the 227 KiB a
#: block can opt in to), and the deepest pipeline it uses.
SMEM_BYTES = 224 * 1024
SMEM_MAX_STAGES = 2  # measured: a third stage does not help
#: One row a block staged in shared memory (softmax_smem / the backward's
#: softmax_backward_smem with one stage, grid = rows): (blocks that fit by
#: shared memory at least, threads, launch-bound blocks an SM). Blocks hold a
#: row (+1 KiB each); the resident blocks' loads overlap one another's
#: reductions. 1024 threads at 2 blocks an SM spill.
SMEM1_SHAPES = ((8, 256, 8), (4, 512, 4), (2, 512, 2), (1, 1024, 1))
#: Forward rows of FWD_SMEM1_ROW_BYTES[input itemsize] (lo, hi) bytes, from
#: FWD_SMEM1_MIN_ROWS_PER_SM rows an SM: one row a block. H100
#: (tools/tune_fwd_occ.py, kernels/tune_fwd_occ.txt; softmax / log-softmax,
#: us) against the dispatched block / persistent smem plans: bfloat16 4096 x
#: 8192 57.8 / 57.5 vs 61.7 / 59.6, 4096 x 16384 106.3 / 102.4 vs 120.8 /
#: 120.6, 512 x 32768 32.8 / 31.9 vs 38.2 / 37.5, 4096 x 32768 193.6 / 192.6
#: vs 212.2 / 197.6; float32 4096 x 8192 97.9 / 97.5 vs 102.5 / 101.0, 512 x
#: 16384 30.2 / 29.4 vs 31.2 / 30.9, 4096 x 16384 193.4 / 199.2 vs 196.3 /
#: 196.1. Slower: 8 KiB rows (bfloat16 4096 x 4096 34.9 vs 32.1), float32 16
#: KiB rows (52.8 vs 51.7), 128 KiB rows (float32 4096 x 32768 581 vs 434: one
#: block an SM).
FWD_SMEM1_ROW_BYTES = {2: (16 * 1024, 64 * 1024), 4: (32 * 1024, 64 * 1024)}
FWD_SMEM1_MIN_ROWS_PER_SM = 2
#: Few rows take a cluster per row only if each row gets >= this many SMs.
MIN_CLUSTER_FEW = 4
#: Block regime: target packs per thread.
PACKS_PER_THREAD = 2
#: ... except 32/64-bit rows of at least BLOCK_FULL_PACKS packs when rows are
#: neither few nor many (the smem kernel takes many): threads hold the full
#: register budget, so blocks are half as large and two share an SM. H100
#: (tools/tune.py --shapes), float32: 512 x 16384 30.9 vs 35.5 us, 256 x 16384
#: 17.2 vs 19.9 us, 512 x 8192 17.0 vs 18.7 us. Softmax only: ptxas spills
#: the log-softmax block kernel at 8 packs a thread (sm_80 and sm_90).
BLOCK_FULL_PACKS = 2048
#: Few rows longer than this many packs go to a cluster even if a block fits,
#: each thread holding about PACKS_PER_THREAD_FEW packs.
CLUSTER_MIN_PACKS_FEW = 2048
PACKS_PER_THREAD_FEW = 2
#: Few long rows in one launch (softmax_rowsync): rows of more than
#: ROWSYNC_MIN_PACKS packs, at most SMs / ROWSYNC_MIN_BLOCKS rows, each row
#: over up to SMs / rows blocks (at most one block per SM: all co-resident)
#: holding ~ROWSYNC_PACKS_PER_THREAD packs a thread. H100 (tools/
#: tune_sync_bwd.py): (1, 128256) fp32 7.7 us vs 9.2 us for the two-launch
#: split; 1-32 rows of 16K-1M columns 0-25% faster than split or cluster;
#: at 64 rows the block / cluster regimes stay ahead.
ROWSYNC_MIN_PACKS = 2048
ROWSYNC_MIN_BLOCKS = 4
ROWSYNC_PACKS_PER_THREAD = 1
#: The per-stream barrier workspace: 8 x ROWSYNC_MAX_ROWS bytes of counters
#: (the most rows a launch may take; softmax.cu's ROWSYNC_MAX_ROWS, the same
#: value: the counters sit at a fixed place, so partials an earlier launch
#: left never land on a later launch's counters), then this many bytes per
#: SM for the partials (rows x splits <= SMs, 16 bytes each at most).
ROWSYNC_MAX_ROWS = 1024
ROWSYNC_WS_BYTES_PER_SM = 64
#: Each split block streams at least this many packs (keeps partials few).
SPLIT_MIN_PACKS = 256
#: Target blocks per SM for the split regime.
SPLIT_BLOCKS_PER_SM = 8
#: Stream / split kernels: threads per block and packs in flight per thread,
#: for 32/64-bit and for 16-bit storage.
STREAM_THREADS = 1024
STREAM_UNROLL = 2
#: The backward stream kernel's write pass runs from the row's end back (its
#: REV flag), re-reading first what the sum pass read last (H100,
#: log_softmax_backward: 4096 x 131072 bfloat16 1573 against 1635 us, 4096 x
#: 262144 3205 against 3249, float32 6109 against 6205; 512 rows 1-3%; the
#: cluster-regime float32 rows of 131072 would stream faster still, 3004 and
#: 386 against 3135 and 406 us, not acted on; kernels/tune_bwd_stream_rev.txt).
BWD_STREAM_REVERSE = True
#: The paper's streaming forms (algorithm="naive" | "safe" | "online") all use
#: one block shape, so the comparison between them is fair.
STREAM_THREADS_PAPER = 512
#: Double arithmetic: at most this many threads (registers per thread).
STREAM_THREADS_F64 = 512
COLS_MAX_THREADS_F64 = 256
#: ... and float arithmetic (1024-thread blocks spill the log variants).
COLS_MAX_THREADS = 512
#: Scalar rows (input/output alignment mismatch) hold at most this many
#: elements a lane in the warp kernel.
SCALAR_NP_MAX = 16
SPLIT_THREADS = 256
#: Column kernel: elements per thread in registers, default block.
COLS_CAP = 16
COLS_THREADS = 256
#: Staged column kernel: shared memory one block may park (bytes), the
#: most bytes of x a tile takes from each row, and its block sizes.
COLS_STAGE_BYTES = 224 * 1024
COLS_STAGE_SEGMENT = 128
#: Axes up to this long stay in registers (softmax_cols); longer ones are staged.
COLS_REGS_MAX_L = 128
#: (input, output) dtypes with a staged kernel (other pairs stream twice).
COLS_STAGED_PAIRS = {("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float32"),
                     ("float16", "float32"), ("bfloat16", "float32"), ("float64", "float64")}
COLS_STAGE_THREADS = 512
COLS_STAGE_THREADS_F64 = 256
#: An axis streamed twice over fewer tiles than this many per SM goes
#: through a transposing copy instead (see cols_prefers_copy).
COLS_COPY_TILES_PER_SM = 1
#: Long strided axes streamed twice with the axis split over blocks
#: (softmax_cols_split_*): block size, blocks per SM aimed at, the widest run
#: of the inner axis one tile takes (bytes), and the fewest unrolled sweeps
#: (THREADS / TX rows x 4) a block streams.
#: H100 (tools/tune_cols.py, L2 flushed): 128-byte tiles, 8 blocks per SM and
#: 8 rows in flight per thread were best or within 2% on every shape tried.
COLS_SPLIT_THREADS = 256
COLS_SPLIT_BLOCKS_PER_SM = 8
COLS_SPLIT_SEGMENT = 128
COLS_SPLIT_MIN_SWEEPS = 1
COLS_SPLIT_UNROLL = 8
#: Axes longer than COLS_REGS_MAX_L take the split stream instead of the
#: staged kernel when: the input is 16-bit (its staged kernel is compute-
#: bound: bf16 (2048, 4096) over axis 0 1.63x contiguous staged vs 1.73x
#: split, (512, 16384) 2.38x vs 1.80x, (65536, 128) 5.5x (copy) vs 1.35x);
#: the axis is shorter than COLS_SPLIT_BELOW_L or at least COLS_SPLIT_FROM_L
#: (float32 (256, 32768) 2.00x vs 1.56x; (8192, 1024) 1.67x vs 1.44x;
#: (32768, 256) 2.23x vs 1.42x); no staged tile fits; or the staged plan
#: would go through the copy (few tiles: (65536, 64) 4.1x vs 1.5x). Float32
#: axes of 512-4096 stay staged ((2048, 4096): 1.42x vs 1.57x).
COLS_SPLIT_BELOW_L = 512
COLS_SPLIT_FROM_L = 8192
#: One-launch strided axes (softmax_cols_sync): the split stream's tiles,
#: each block holding NR packs a thread in registers (rows of the tile:
#: THREADS / TX x NR) and prefetching its next item into shared memory,
#: the tile's blocks meeting at a barrier; launched cooperatively (all
#: blocks resident). COLS_SYNC_NR: the NR instantiated, each with the blocks
#: per SM its __launch_bounds__ guarantees (COLS_SYNC_MINB); the smallest NR
#: whose grid fits at once is taken, else the largest in rounds of whole
#: tiles. H100 (tools/tune_cols_sync.py, kernels/tune_cols_sync.txt), time
#: against the same data contiguous, 8M elements unless noted: float32
#: (2048, 4096) 1.24x vs 1.42x staged, (16384, 512) 1.22x vs 1.48x split,
#: (4096, 8192) 1.31x vs 1.62x, (8192, 8192) 1.21x vs 1.54x; bfloat16
#: (2048, 4096) 1.42x vs 1.70x split, (1000, 1000) 1.95x vs 2.89x. Worse
#: with many blocks a tile (the barrier and the partials' merge grow with
#: them): (65536, 128) float32 1.51x vs 1.31x, bfloat16 (32768, 256) 1.86x
#: vs 1.68x; where a block's rows outnumber the axis (half its registers
#: idle) the split stream's finer grid wins (bfloat16 (256, 32768) 2.14x vs 1.73x).
#: Since commit c028fed (the column totals once a column in shared memory;
#: float16's (max, sum) in two sweeps, spill-free at NR 16 so float16 runs
#: NR 16 too; tools/sync_variants.py, tools/layout_table.py,
#: kernels/sync_variants.txt, kernels/layout_table.txt) 16-bit inputs also win
#: in many rounds: (8192, 8192) bfloat16 1.46x vs 1.70x split, float16 1.39x
#: vs 1.66x; (16384, 4096) 1.58x vs 1.72x, 1.50x vs 1.70x; float16 (2048,
#: 4096) 1.31x vs 2.13x cluster. So: axes of at least one block's rows, at
#: most COLS_SYNC_MAX_SPLITS blocks a tile, at most COLS_SYNC_MAX_ROUNDS rounds.
#: The "worse with many blocks a tile" above was the merge of the tile's
#: partials, read with a load per (m, d) value at a 64-byte stride between
#: lanes; coalesced (cols_merge_partials, tools/narrow_try.py,
#: kernels/narrow_try.txt) the sync kernel wins up to 256 blocks a tile and
#: 8 rounds: bfloat16 (65536, 64) 1.32x vs 1.75x split, (32768, 256) 1.21x vs
#: 1.53x, (65536, 128) 1.21x vs 1.58x, (131072, 64) 1.01x vs 1.26x, (32768,
#: 1024) 1.35x vs 1.67x in 4 rounds; float32 (65536, 64) 1.16x vs 1.41x,
#: (65536, 512) 1.06x vs 1.23x in 8 rounds. NR 4 only up to
#: COLS_SYNC_NR_MAX_SPLITS[4] blocks a tile (bfloat16 (32768, 64): NR 4 in 256
#: blocks 1.85x, NR 16 in 64 blocks 1.48x).
COLS_SYNC_THREADS = 256
COLS_SYNC_NR = (4, 16)
COLS_SYNC_MINB = {4: 3, 16: 2, 32: 2}  # (NR 32: narrow packs only, see COLS_NARROW_NR)
COLS_SYNC_NR_MAX_SPLITS = {4: 32, 16: 256}
COLS_SYNC_MAX_SPLITS = 256
COLS_SYNC_MAX_ROUNDS = 64
#: Balanced rounds: the splits NR needs can leave a sync plan's rounds part
#: full (float32 (3000, 1500): 47 tiles x 6 splits = 282 items on 264
#: blocks, a second round of 18). The kernel shares the axis's rows evenly
#: among any number of splits (at most NR packs a thread), so the dispatcher
#: takes the most splits (up to the plan's limit) that keep the rounds, i.e.
#: the fewest packs a thread in those rounds (the fewest splits that give
#: them). H200 (tools/sync_balance_try.py, bench/results/nvidia-h200/kernels/
#: sync_balance.txt): a round more costs 25-35%, a pack a thread fewer in the
#: same rounds gains a little: float32 (3000, 1500) 1.65x -> 1.46x, (4000,
#: 1500) 1.53x -> 1.45x, (4000, 1200) 1.56x -> 1.39x; bfloat16 (6000, 3001)
#: 1.65x -> 1.61x. H100 public call (kernels/layout_ab-b82ed61.txt,
#: layout_table.txt): float32 (4000, 1500) 1.53x -> 1.41x.
#: At most COLS_SYNC_BALANCE_SPLITS x the splits NR needs and at most
#: COLS_SYNC_BALANCE_MAX_SPLITS (a tile's barrier and merge grow with its
#: splits: H100, tools/layout_table.py, bfloat16 (65536, 64) at 256 splits
#: 1.76x against 1.31x at 128), 16-byte packs only (the narrow-pack sync
#: plans were not measured).
#: Plans in one round keep NR's splits (COLS_SYNC_BALANCE_MIN_ROUNDS: the
#: gains measured were in rounds; one-round float32 log_softmax (2048, 1024)
#: and (2000, 1000) lost 5-7% with more splits and 256-byte tiles, H100,
#: kernels/layout_ab-b82ed61.txt).
COLS_SYNC_BALANCE = True
COLS_SYNC_BALANCE_SPLITS = 2
COLS_SYNC_BALANCE_MAX_SPLITS = 64
COLS_SYNC_BALANCE_MIN_ROUNDS = 2
#: Bytes of I a tile of the (unskewed) sync plan takes, by itemsize (the
#: split stream's COLS_SPLIT_SEGMENT elsewhere): float32 256-byte tiles
#: (H200, tools/sync_balance_try.py --wide; balanced, against 128 bytes): (4000,
#: 1500) 1.37x against 1.45x, (4000, 2500) 1.40x against 1.53x, (3000, 1500)
#: 1.40x against 1.46x, (4000, 1800) 1.24x against 1.28x; where they take
#: at most COLS_SYNC_SEGMENT_MAX_SPLITS splits, for plans whose 128-byte
#: tiles take COLS_SYNC_BALANCE_MIN_ROUNDS rounds (long axes over many: H100,
#: tools/layout_table.py, (32768, 256) 1.26x at 128 splits against 1.11x
#: with 128-byte tiles at 64, (65536, 128) 1.33x against 1.06x, (16384,
#: 4096) 1.27x against 1.21x).
COLS_SYNC_SEGMENT = {4: 256}
COLS_SYNC_SEGMENT_MAX_SPLITS = 32
#: Dense slabs whose rows are off the 32-byte sector grid (I x itemsize not a
#: multiple of 32: a tile's row then touches one sector more than it holds)
#: take those tiles at up to COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_SPLITS splits:
#: the extra sector is paid once a 256 bytes, not once a 128. H100
#: (tools/layout_table.py with and without, COLS_SYNC_SEGMENT_MAX_SPLITS=64
#: for all; kernels/fill4.txt), float32 against the same data contiguous:
#: (12000, 2500) 1.61-1.65x -> 1.44-1.52x, (12000, 3500) 1.70-1.76x ->
#: 1.46-1.53x, (16000, 1500) 1.59-1.63x -> 1.46-1.51x, (16000, 3500)
#: 1.88-1.93x -> 1.56-1.60x, (12000, 4100) 1.69-1.73x -> 1.43-1.49x; rows
#: on the grid lost ((12000, 1000) 1.19-1.21x -> 1.37-1.40x, (12000, 2048)
#: 1.17-1.20x -> 1.28-1.32x), as did a plan taking over
#: COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_ROUNDS x the 128-byte plan's rounds
#: ((12000, 700): 3 rounds for 2, 1.38-1.39x -> 1.46-1.47x; (12000, 4100)
#: took 13 for 12 and won).
COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_SPLITS = 64
COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_ROUNDS = 1.25
#: Strided axes in one launch without a grid barrier (softmax_cols_cl, sm_90):
#: a thread-block cluster of COLS_CL_CLUSTERS blocks is one tile, each block
#: holding NR packs a thread of its rows in registers, the blocks' per-column
#: (max, sum) partials exchanged by st.async into each other's shared memory.
#: Taken (same-dtype float16 / bfloat16 / float32, 16-byte packs) where it beat
#: softmax_cols_sync on H100 (tools/cols_cl_try.py, kernels/cols_cl.txt, time
#: against the same data contiguous): arrays of at most COLS_CL_MAX_BYTES
#: (float32 (512, 512) 1.35x vs 1.77x, (200, 4096) 1.30x vs 1.71x; bfloat16
#: (512, 512) 1.61x vs 2.21x, (1000, 1000) 1.65x vs 2.10x, (2048, 1024) 1.69x
#: vs 2.35x), and 16-bit arrays whose tile fits a cluster of at most
#: COLS_CL_16_MAX_CLUSTER blocks at NR = COLS_CL_16_NR (bfloat16 (512, 16384)
#: 1.45x vs 1.54x, (64, 512, 256) 1.45x vs 1.57x). Larger arrays over bigger
#: clusters lose (float32 (2048, 4096) 1.58x vs 1.20x: a cluster of 8 blocks
#: of 1 per SM). NR: the smallest of COLS_CL_NR whose cluster has at most
#: COLS_CL_FIRST_CLUSTER blocks, else at most 8 (float32 (1000, 1000) 1.58-1.63x
#: at NR 4 in clusters of 8 against 1.82-1.90x at NR 8 in clusters of 4; 16-bit
#: likewise since the coalesced partial merge (tools/narrow_try.py rule --cl,
#: kernels/narrow_try.txt): bfloat16 (1000, 1000) 1.52x at NR 4 against 1.73x
#: at NR 8, float16 1.49x against 1.76x in one run; the other way round at
#: c028fed);
#: COLS_CL_MINB[NR] blocks an SM (register cap). float32 arrays over
#: COLS_CL_MAX_BYTES take it, like 16-bit ones, at NR = COLS_CL_16_NR in a
#: cluster of at most COLS_CL_16_MAX_CLUSTER, where the axis is shorter than a
#: sync block's rows (the sync kernel cannot take it): float32 (256, 32768)
#: 1.15x (NR 8, one block a tile) against 1.52x split. (These figures predate
#: c49a5a8's stores without L1 allocation, which moved rows off 128-byte
#: lines, e.g. (1000, 1000): float32 1.37x, bfloat16 1.24x at NR 4 in
#: clusters of 8, kernels/layout_table.txt; the rule was not re-measured.)
COLS_CL_THREADS = 256
COLS_CL_NR = (4, 8, 16)
COLS_CL_MINB = {4: 3, 8: 2, 16: 1, 32: 2}  # (NR 32: narrow packs only, see COLS_NARROW_NR)
COLS_CL_CLUSTERS = (1, 2, 4, 8)
COLS_CL_FIRST_CLUSTER = {2: 8, 4: 8}  # by input itemsize (see above)
COLS_CL_MAX_BYTES = 4 << 20
COLS_CL_16_NR = 8
COLS_CL_16_MAX_CLUSTER = 2
COLS_CL_DTYPES = ("float16", "bfloat16", "float32")
COLS_CL_MAX_TILES = 65535
COLS_CL_W_MAX = 64  # widest tile in elements (softmax.cu's COLS_CL_W_MAX)
#: Half packs (8 bytes) on 16-byte-aligned axes: float32 axes, and 16-bit
#: arrays over COLS_CL_MAX_BYTES, whose tile fits a cluster of at most
#: COLS_CL_HALF_MAX_CLUSTER[itemsize] blocks (float32 log_softmax:
#: COLS_CL_HALF_LOG_MAX_CLUSTER; 16-bit clusters of 4 only for arrays of at
#: most COLS_CL_HALF_16_C4_MAX_BYTES) at NR = COLS_CL_HALF_NR take
#: softmax_cols_cl with 8-byte packs there (float32: a tile 32 wide, 16
#: lanes a row), when the grid has at least COLS_CL_HALF_MIN_BLOCKS x SMs
#: blocks. H100 (tools/cols_narrow_try.py on aligned shapes, then
#: tools/layout_table.py with and without the rule; kernels/cols_half.txt),
#: time against the same data contiguous, softmax / log_softmax: float32
#: (700, 1500) 1.25x / 1.29x against 1.51x / 1.50x (sync), (2000, 1000)
#: 1.30x against 1.52x (sync), (2048, 1024) 1.27x against 1.47x (sync),
#: (1000, 1000) 1.24x / 1.26x against 1.38x / 1.40x (cl, 16-byte packs at NR
#: 4), (64, 512, 256) 1.06x / 1.11x against 1.19x / 1.18x (sync), (1024,
#: 8192) 1.09x / 1.14x against 1.18x / 1.14x; 16-bit (1000, 3000) 1.21-1.28x
#: against 1.49-1.57x (sync). Measured losses that the limits keep out:
#: float32 log_softmax in clusters of 8 ((2048, 4096) 1.21x against 1.16x,
#: (2000, 1000) 1.51x against 1.49x), 16-bit (1024, 8192) in clusters of 4
#: (16 MiB: 1.26-1.43x against 1.17-1.20x sync).
COLS_CL_HALF_NR = 16
COLS_CL_HALF_MAX_CLUSTER = {4: 8, 2: 4}
COLS_CL_HALF_LOG_MAX_CLUSTER = 4
COLS_CL_HALF_16_C4_MAX_BYTES = 8 << 20
COLS_CL_HALF_MIN_BLOCKS = 0.75
#: Small arrays on few blocks (_cols_cl_small): the plans above give an
#: array of a few MB with short unit-stride rows a handful of blocks (16-bit
#: (4000, 64): one cluster of 8; (8000, 64): a sync plan of 16), since a
#: tile is 128 bytes wide and a thread holds up to 16 packs. Where the
#: chosen cluster or sync plan has at most SMs / COLS_CL_SMALL_DIV[itemsize]
#: blocks (arrays of at most COLS_CL_SMALL_MAX_BYTES), the cluster kernel
#: runs on 32-byte tiles (else 64) at the smallest NR of COLS_CL_SMALL_NR
#: whose axis fills a cluster of 8, where that gives more blocks. H100
#: (tools/layout_table.py with and without, COLS_CL_SMALL=False;
#: kernels/cl_small.txt), against the same data contiguous: 16-bit (4000,
#: 64) 1.86-2.11x -> 1.28-1.49x, (4000, 256) 1.76-1.95x -> 1.42-1.47x,
#: (8000, 64) 1.93-1.96x -> 1.35-1.48x, (3000, 128) 1.92-1.99x -> 1.34-1.45x;
#: float32 (4000, 64) 1.65-1.67x -> 1.35-1.40x, (6000, 32) 1.55-1.56x -> 1.23x. Not
#: taken: float32 plans of 33-128 blocks ((2000, 512) 1.21-1.24x against
#: 1.36-1.39x), 16-bit ones of 128 ((2048, 1024) float16 1.44-1.47x against
#: 1.49-1.52x), NR 16 (16-bit (12000, 64) log_softmax 1.54-1.65x against
#: 1.66-1.72x). COLS_CL_SMALL = False turns it off (the narrow-pack form too).
COLS_CL_SMALL = True
COLS_CL_SMALL_MAX_BYTES = 4 << 20
COLS_CL_SMALL_SEGMENTS = (32, 64)
COLS_CL_SMALL_DIV = {2: 2, 4: 4}
COLS_CL_SMALL_NR = (4, 8)
#: The same for the narrow-pack cluster plan with 8-byte 16-bit packs
#: (_choose_cols_narrow) where it has at most SMs / COLS_CL_SMALL_NARROW_DIV
#: blocks, at NR COLS_CL_SMALL_NARROW_NR, in the smallest cluster of
#: COLS_NARROW_CLUSTERS that holds the axis where that is 6 or 8 (measured
#: in clusters of 8; kernels/cl_small.txt, runs 3 and 5):
#: (4000, 100) bfloat16 1.87-1.90x -> 1.36-1.40x, float16 2.28-2.34x ->
#: 1.48-1.54x; (3000, 300) float16 1.92-1.96x -> 1.64x; at 40-64 blocks
#: it lost ((4000, 500) bfloat16 1.63x -> 1.83x). And a sync plan of 16-byte
#: packs with as few blocks where no such cluster plan applies (the axis too
#: long for a cluster of 8 at NR 8) runs at NR 4 on COLS_SYNC_SMALL_SEGMENT-
#: byte tiles when that gives more blocks in one round, at most
#: COLS_SYNC_BALANCE_MAX_SPLITS blocks a tile (_cols_sync_small):
#: 16-bit (16000, 32) 1.69-1.90x -> 1.37-1.51x, (12000, 48) 1.86-1.97x ->
#: 1.44-1.59x; float32 (12000, 16) 1.48x -> 1.29x; one loss, bfloat16
#: (16000, 128) log_softmax 1.61-1.63x -> 1.68-1.71x.
COLS_CL_SMALL_NARROW = True
COLS_CL_SMALL_NARROW_NR = (8, 16)
COLS_CL_SMALL_NARROW_DIV = 4
COLS_SYNC_SMALL = True
COLS_SYNC_SMALL_SEGMENT = 64
#: Filled cluster grids: a same-dtype 16-bit array of 16-byte packs, at most
#: COLS_CL_FILL_MAX_BYTES, whose axis has at most COLS_CL_FILL_MAX_L rows and
#: whose plan (after the rules above) is a sync plan loading the SMs unevenly
#: (the busiest SM holds over COLS_CL_FILL_IMBALANCE x the mean of blocks: a
#: grid of 1.1-2.3 x SMs, or under 0.8 x SMs) or a cluster plan of under 0.8 x
#: SMs blocks, takes the softmax_cols_cl plan (clusters of COLS_CL_CLUSTERS,
#: NR of COLS_CL_NR) with COLS_CL_FILL_BLOCKS (low, high) x SMs blocks, the
#: widest tiles of COLS_CL_FILL_SEGMENTS first, then the fewest rows a thread
#: (for a cluster plan, only one with more blocks). H100 (an oracle, now
#: tools/cols_oracle.py: every plan the plan functions build, on the layout
#: sweep's shapes over 1.5x; then tools/layout_table.py with the rule on and
#: off, kernels/cl_fill.txt runs 7-8), softmax / log_softmax, bfloat16 and
#: float16: (2000, 1200) 1.63-1.77x -> 1.33-1.48x, (3000, 768) 1.61-1.77x ->
#: 1.34-1.47x, (2000, 3000) 1.47-1.63x -> 1.30-1.37x, (6000, 384) 1.64-1.77x
#: -> 1.43-1.54x, (3000, 640) 1.59-1.80x -> 1.45-1.58x. Sync plans of up to
#: SMs blocks stay: the cluster plan lost there ((6000, 640) 1.41-1.60x ->
#: 1.59-1.72x, (2000, 2048) 1.33-1.37x -> 1.45-1.48x), as it did on longer
#: axes (float16 (16000, 256) 1.47x -> 1.76x) and for float32 ((2000, 512) in
#: the COLS_CL_SMALL note).
COLS_CL_FILL = True
COLS_CL_FILL_DTYPES = ("float16", "bfloat16")
COLS_CL_FILL_MAX_BYTES = 12 << 20
COLS_CL_FILL_MAX_L = 6000
COLS_CL_FILL_IMBALANCE = 1.25
COLS_CL_FILL_BLOCKS = (0.9, 2.5)
COLS_CL_FILL_SEGMENTS = (128, 64, 32)
#: Narrow packs: a unit-stride axis (or a stride, or a pointer) that is not a
#: multiple of 16 bytes, e.g. (1000, 1001) or 16-bit (700, 1500), gives packs
#: of 8, 4 or 2 bytes or scalars. Same-dtype float16 / bfloat16 / float32 on
#: sm_90 then take softmax_cols_cl with those packs (a thread's rows then hold
#: fewer registers, so NR goes up to 32, in clusters of 2 or more: alone a
#: block spills at 2 blocks an SM), and axes too long for a cluster of 8 take
#: softmax_cols_sync with scalars (without the cp.async prefetch, which moves
#: 16-byte packs; 8-byte packs spill at NR 32) in at most
#: COLS_NARROW_SYNC_MAX_ROUNDS rounds; the rest stream
#: split (float32 (8000, 1001) 1.84x against 2.63x staged). The cl plan:
#: 16-bit packs of COLS_NARROW_PACK_BYTES, then scalars (measured faster than
#: 4-byte 16-bit or 8-byte float32 packs: (1000, 1002) 1.26-1.31x against
#: 1.31-1.43x); NR in COLS_NARROW_NR order; the first whose grid has at least
#: COLS_NARROW_MIN_BLOCKS x SMs blocks, else the one with the most. H100 (tools/cols_narrow_try.py,
#: kernels/cols_narrow.txt), time against the same data contiguous:
#: (1000, 1001) bfloat16 1.25x (scalars, NR 16, clusters of 8) vs 2.39x
#: split, float16 1.27-1.29x vs 2.39-2.50x, float32 1.32-1.34x vs 1.73x
#: staged; 16-bit (700, 1500) 1.21-1.24x (8-byte packs, NR 8) vs 2.09-2.20x;
#: (333, 3001) 1.17-1.39x (NR 32, clusters of 2) vs 1.91-2.34x; (2000, 3001)
#: 1.58-1.92x vs 2.26-2.50x; (4000, 1001) by sync at NR 32 1.81-2.04x vs
#: 1.93-2.37x. Sync in 4 rounds lost to the split stream ((8000, 1001)
#: bfloat16 2.39x vs 2.13x).
COLS_NARROW_NR = (32, 16, 8)
#: The narrow-pack cluster plan, once its packs and NR are chosen (over the
#: clusters of COLS_CL_CLUSTERS, as above), takes the smallest cluster of
#: COLS_NARROW_CLUSTERS that holds the axis: clusters of 3 and 6 where 4 and 8
#: left a block or two with few or no rows. At NR 32 (2 blocks an SM) at most
#: 30 clusters of 8 are resident at once (ncu's "Max Active Clusters", H200),
#: so (1500, 1001)'s 32 tiles ran in two waves in clusters of 8 and run in
#: one in clusters of 6. H100 A/B (tools/layout_table.py --set
#: COLS_NARROW_CLUSTERS=(1, 2, 4, 8), kernels/narrow_clusters.txt), softmax
#: against the same data contiguous: (1500, 1001) float32 1.80x -> 1.46x,
#: bfloat16 1.78x -> 1.39x, float16 1.78x -> 1.47x; (700, 2001) 1.65-1.74x ->
#: 1.21-1.31x; (1500, 501) 1.46-1.52x -> 1.38-1.48x; 16-bit (700, 1500)
#: (8-byte packs, NR 8: 6 blocks) 1.17-1.19x -> 1.16x; log_softmax alike.
#: Where the cluster stays 8 nothing changes ((2000, 1001): two waves).
COLS_NARROW_CLUSTERS = (1, 2, 3, 4, 6, 8)
#: Blocks an SM (the kernel's MINB, launch bounds) by (dtype, pack elements,
#: NR) for narrow-pack cluster plans, where not COLS_CL_MINB[NR]. bfloat16
#: scalars at NR 32 fit 80 registers without spilling (float32 spills 4-12
#: bytes, 8-byte bfloat16 packs 124-156), so 3 blocks an SM: 45 clusters of
#: 8 resident, not 30, and (2000, 1001)'s 32 run in one wave. float16 fits
#: since its NR 32 form converts with the half taken from a 32-bit register
#: and reduces in two sweeps (common.cuh to_compute_w, softmax.cu
#: cols_cl_max_first; before: 8-12 bytes spilled).
#: H100 A/B (kernels/narrow_clusters.txt, run 2), softmax against the same
#: data contiguous: bfloat16 (2000, 1001) 1.69-1.71x -> 1.42-1.44x, (2000,
#: 1002) 1.83x -> 1.51-1.54x, (1500, 1501) 1.74-1.75x -> 1.42-1.43x, (1000,
#: 3001) 1.59-1.61x -> 1.53-1.56x, none slower; log_softmax alike. float16
#: (kernels/f16_wide.txt): (2000, 1001) 1.70-1.74x -> 1.45-1.51x, (1500, 1501)
#: 1.77-1.81x -> 1.39-1.42x, (1000, 3002) 1.71-1.75x -> 1.59-1.64x.
COLS_NARROW_MINB = {("bfloat16", 1, 32): 3, ("float16", 1, 32): 3}
#: Bytes of a row a narrow-pack cluster tile spans (at most 32 packs). 32
#: (16-lane 16-bit tiles: more tiles in smaller clusters) did not help the
#: 2000-row shapes whose clusters stay 8 (float16 (2000, 1001) 1.85x against
#: 1.83x; kernels/narrow_clusters.txt).
COLS_NARROW_SEGMENT = COLS_SPLIT_SEGMENT
COLS_NARROW_PACK_BYTES = 8
COLS_NARROW_MIN_BLOCKS = 1.25
COLS_NARROW_SYNC_NR = 32
COLS_NARROW_SYNC_MAX_ROUNDS = 2
#: The narrow-pack (scalar) sync plans of dense COLS_NARROW_SYNC8_DTYPES
#: slabs of 8-byte packs that would take two rounds or more (and so the fold,
#: _fold_over_rounds) take the sync plan of those 8-byte packs at NR
#: COLS_NARROW_SYNC8_NR on COLS_NARROW_SYNC8_SEGMENT-byte tiles where that
#: runs in one round (about 4100-30000 rows of 70-960 columns). Found by
#: tools/cols_oracle.py ((8000, 500), (7000, 500), (8000, 420)). H100 A/B
#: (tools/layout_table.py, COLS_NARROW_SYNC8_DTYPES=(); kernels/sync4_cl.txt,
#: runs 3-4), against the same data contiguous, softmax: (4200, 900) 1.57x ->
#: 1.25x, (8000, 500) 1.64-1.67x -> 1.52x, (13000, 300) 1.46x -> 1.19x,
#: (25000, 100) 1.76x -> 1.68x; from scalars on odd lengths (no fold):
#: (4203, 900) 1.63x -> 1.24x, (8859, 300) 1.81x -> 1.36x, (27483, 100)
#: 2.13x -> 1.60x; from the long form of _cols_fill4: (8000, 300) 1.45-1.54x
#: -> 1.43-1.52x. 19 of 20 faster, log_softmax 20 of 20 (the one: (28000,
#: 76) 1.65x against 1.64x). float16 (softmax, run 3) gained up to 8000 rows
#: and lost from 9000 ((25000, 100) 1.80x -> 1.94x): not taken.
COLS_NARROW_SYNC8_DTYPES = ("bfloat16",)
COLS_NARROW_SYNC8_NR = 16
COLS_NARROW_SYNC8_SEGMENT = 128
#: Tiles of 4-byte packs (_cols_fill4): an array of COLS_FILL4_DTYPES of at
#: least COLS_FILL4_MIN_BYTES whose plan has under COLS_FILL4_MAX_BLOCKS x
#: SMs blocks (16-bit: the narrow-pack cluster plan of 8-byte packs, after
#: the small-array form; float32: the cluster or sync plan of 16-byte packs,
#: after the small-array forms) takes the cluster plan of 4-byte packs
#: (16-bit pairs, float32 scalars) on full COLS_FILL4_SEGMENT-byte tiles (8
#: lanes a row) at NR COLS_FILL4_NR, in the smallest cluster of
#: COLS_NARROW_CLUSTERS that holds the axis (so axes of at most 4096 rows),
#: where that has at least as many blocks and at most COLS_FILL4_MAX_GRID x
#: SMs (one wave: 3 blocks an SM, less what clusters of 8 leave unplaced; a
#: block holds 512 rows of 32 bytes, so arrays of at most 5.9 MB).
#: Found by tools/cols_oracle.py (every plan the plan functions build; these
#: were among the best at 2000-4000 rows). H100 (tools/layout_table.py with
#: and without, COLS_FILL4=False; kernels/fill4.txt), against the same data
#: contiguous, softmax and log_softmax, runs 1-3: 16-bit (4000, 300)
#: bfloat16 1.69-1.82x -> 1.36-1.48x, float16 1.83-2.07x -> 1.34-1.49x;
#: (3000, 500) 1.62-1.94x -> 1.35-1.50x; (2500, 500) 1.61-1.99x ->
#: 1.29-1.48x; (4000, 180) 1.48-1.56x -> 1.29-1.34x; (4000, 100) (the same
#: 56 blocks; 8-byte packs on 4-lane tiles were slower) 1.51-1.56x ->
#: 1.36-1.40x; float32 (3000, 160) 1.47-1.61x -> 1.31-1.32x, (3000, 256)
#: 1.45-1.56x -> 1.32-1.36x, (2500, 256) 1.34-1.48x -> 1.20-1.23x, (4000,
#: 200) 1.36-1.46x -> 1.23-1.29x, (1000, 128) 1.16-1.23x -> 1.11-1.13x; ties
#: at (1000, 1000) (1.23-1.26x against 1.24-1.27x) and (2000, 512)
#: (1.34-1.36x against 1.33-1.42x). Kept from it: plans of SMs blocks and
#: more ((2000, 1500), 192 blocks: 1.41-1.45x against 1.70-1.84x with
#: 4-byte packs), grids over COLS_FILL4_MAX_GRID ((4000, 780), 392 blocks in
#: 49 clusters of 8: 1.61-1.71x against 1.74-1.88x), NR 32 for 16-bit
#: cluster plans ((8000, 20): 1.33-1.43x against 1.60-1.71x) and arrays
#: under COLS_FILL4_MIN_BYTES ((3000, 36) float16 1.37-1.39x against
#: 1.44-1.48x).
COLS_FILL4 = True
COLS_FILL4_DTYPES = ("bfloat16", "float16", "float32")
COLS_FILL4_MIN_BYTES = 256 << 10
COLS_FILL4_MAX_BLOCKS = 1.0
COLS_FILL4_MAX_GRID = 2.75
COLS_FILL4_SEGMENT = 32
COLS_FILL4_NR = 16
#: Axes too long for NR 16 in a cluster of 8 (4097-8192 rows): sync plans of
#: COLS_FILL4_LONG_DTYPES (float32's of 16-byte packs; 16-bit narrow-pack
#: ones, folded or not) take NR COLS_FILL4_LONG_NR where the grid has at
#: most COLS_FILL4_LONG_MAX_GRID x SMs blocks (NR 32 holds 2 blocks an SM,
#: not 3). H100 (tools/layout_table.py with and without,
#: COLS_FILL4_LONG_DTYPES=(); kernels/fill4.txt, runs 5-6), float32 against the
#: same data contiguous: (4500, 100) 1.70-1.71x -> 1.19-1.33x, (6000, 96)
#: 1.53-1.56x -> 1.16-1.33x, (8000, 100) 1.57-1.61x -> 1.23-1.41x, (7000,
#: 128) 1.50-1.51x -> 1.33-1.38x, (8000, 200) (200 blocks) 1.45-1.48x ->
#: 1.33-1.37x. Larger grids lost ((8000, 256), 256 blocks: 1.31-1.35x ->
#: 1.64-1.68x; (5000, 384), 288: 1.19-1.20x -> 1.42-1.43x; (6000, 300), 228:
#: 1.22-1.24x -> 1.25-1.27x), as did cluster plans' axes (mixed: (8192, 48)
#: 1.33-1.39x -> 1.26-1.39x, (7000, 32) 1.32-1.36x -> 1.27-1.38x): the long
#: form replaces sync plans only. 16-bit (H200, the folded narrow sync
#: plans of 70-96 blocks it replaces; bench/results/nvidia-h200/kernels/
#: fill4_long16.txt): bfloat16 (8000, 300) 1.58-1.69x -> 1.37-1.48x, (5000,
#: 500) 1.75-1.81x -> 1.54-1.57x, float16 (7000, 300) 1.85-1.93x ->
#: 1.62-1.68x; all 12 cases faster, softmax and log_softmax.
COLS_FILL4_LONG_NR = 32
COLS_FILL4_LONG_DTYPES = ("float32", "bfloat16", "float16")
COLS_FILL4_LONG_MAX_GRID = 1.6
#: float32 sync plans at NR 4 (16-byte packs, about 2000-4100 rows of
#: 260-740 columns: at most 32 splits of 128 rows, the whole grid at once at
#: 3 blocks an SM) take the cluster plan of 16-byte packs at NR
#: COLS_SYNC4_CL_NR on COLS_SYNC4_CL_SEGMENT-byte tiles where one exists
#: (clusters of 8 hold up to 4096 rows) in at most COLS_SYNC4_CL_MAX_GRID x
#: SMs blocks. Found by tools/cols_oracle.py: in all 18 such cases it timed
#: (softmax), a cluster plan beat the sync plan, this one among the best
#: three every time. H100 A/B (tools/layout_table.py, COLS_SYNC4_CL_DTYPES=();
#: kernels/sync4_cl.txt, runs 3-4), against the same data contiguous,
#: softmax | log_softmax: (4000, 300) 1.64-1.66x -> 1.45-1.46x | 1.64-1.66x
#: -> 1.46-1.49x, (3000, 384) 1.57-1.60x -> 1.42x | 1.61-1.62x -> 1.44-1.46x,
#: (4050, 260) 1.76x -> 1.58x | 1.69x -> 1.56x, (3200, 400) 1.49x -> 1.31x
#: | 1.49x -> 1.36x (136-224 blocks; 7 of 7 faster in both). Grids of
#: 256 blocks and more (32 clusters of 8 and more at 2 blocks an SM) lost in
#: log_softmax: (2050, 512) 1.53x -> 1.78x, (2500, 608) 1.21x -> 1.46x,
#: (2050, 736) 1.25x -> 1.56x (softmax too there: 1.24x -> 1.35x).
COLS_SYNC4_CL_DTYPES = ("float32",)
COLS_SYNC4_CL_NR = 8
COLS_SYNC4_CL_SEGMENT = 64
COLS_SYNC4_CL_MAX_GRID = 1.75
#: Small 16-bit arrays (at most COLS_CL16_MAX_BYTES, axes of COLS_CL16_MIN_L
#: .. COLS_CL16_MAX_L) whose rows sit on the 8- or 16-byte grid take the
#: cluster plan in clusters of 16 blocks, H100's non-portable size (the
#: loader lets such kernels launch; the plan's fallback, the plan without this
#: rule, runs where the GPU cannot hold such a cluster): an axis of up to
#: 16384 rows fits 16 blocks' registers on narrow tiles, twice the blocks a
#: tile of clusters of 8. Tiles of COLS_CL16_SEGMENT bytes, or of
#: COLS_CL16_WIDE_SEGMENT bytes where those would be too many, up to
#: COLS_CL16_MAX_TILES[(the rows' grid in bytes, rows on the 32-byte sector
#: grid)]; wider arrays keep their plans. Packs: half the widest the rows
#: allow (8 bytes on the 16-byte grid, 4 on the 8-byte grid), at the least NR
#: that holds the axis, on the 16-byte grid whole 16-byte packs at half that
#: NR where it is over COLS_CL16_MAX_NR; arrays needing more keep their plans.
#: H100, kernels/cl16.txt: run 1 (tools/cols_oracle.py --cl16 over the 35 grid
#: cases over 1.5x of at most 40 us contiguous): a cluster of 16 was the best
#: plan in 24, e.g. float16 (8000, 100) 1.65x -> 1.23x, (12000, 160) 1.67x ->
#: 1.38x; from 8 MB on it lost. Runs 2-3 (tools/layout_table.py, the rule on
#: and off, softmax and log_softmax, on the grid cases it moves and 81
#: held-out shapes a dtype) set the bounds: more tiles lost (bfloat16 (2000,
#: 1500) 1.43x -> 2.01x on 94 tiles; float16 rows off the sector grid from 8
#: tiles of 32 bytes, (5000, 120) 1.56x -> 1.69x, and from 15 of 64, (5000,
#: 456) 1.59x -> 1.81x), as did 16-byte packs at NR 16 (float16 (10000, 256)
#: 1.55x -> 1.75x) and 4-byte packs at NR 32 (bfloat16 (10000, 300) 1.33x ->
#: 1.66x). Run 4, this rule: on the 60 grid cases it moves 59 faster in
#: softmax and 57 in log_softmax (19 over 1.5x -> 0); on 120 held-out cases
#: 114 / 118; on 58 new ones 58 / 57; both grids 45 -> 29 cases of 345 over
#: 1.5x.
COLS_CL16_MAX_BYTES = 6_500_000
COLS_CL16_MIN_L = 2000
COLS_CL16_MAX_L = 16384
COLS_CL16_MIN_PACK_BYTES = 8
COLS_CL16_SEGMENT = 32
COLS_CL16_WIDE_SEGMENT = 64
COLS_CL16_MAX_TILES = {(16, True): (10, 20), (16, False): (5, 8), (8, False): (20, 0)}
COLS_CL16_MAX_NR = {4: 16, 8: 8, 16: 8}  # by pack bytes
#: Axes over COLS_CL16_LONG_MIN_L rows whose rows are on the 16-byte grid but
#: off the 32-byte sector grid may take up to COLS_CL16_LONG_OFF_SECTOR_TILES
#: tiles of 32 bytes (in place of COLS_CL16_MAX_TILES' 5): 16-byte packs at
#: NR 8, two lanes a row. H200 (kernels/cl16_lanes.txt, runs 4-5):
#: tools/cols_oracle.py --cl16 found that plan the best on every such case
#: of 9-13 tiles (bfloat16 / float16 (16000, 200) 1.47x / 1.59x -> 1.40x /
#: 1.45x, (12000, 200) 1.55x / 1.64x -> 1.42x / 1.46x) and far slower at 15-20
#: tiles on rows on the sector grid ((16000, 256) 1.41x -> 1.83x), which keep
#: their bounds.
COLS_CL16_LONG_MIN_L = 8193
COLS_CL16_LONG_OFF_SECTOR_TILES = 13
#: Axes and row lengths whose cl16 plans cover every instantiation the rule
#: can choose (the compile-check enumeration; test_cols_cl16_rule checks it).
COLS_CL16_PROBE_L = (2000, 4096, 4097, 8192, 8193, 10000, 16384)
COLS_CL16_PROBE_I = (6, 64, 100, 102, 320, 512)
#: Short axes of small 16-bit arrays (COLS_CL16_LANES_MIN_L ..
#: COLS_CL16_LANES_MAX_L rows, at most COLS_CL16_MAX_BYTES) take clusters of
#: 16 on tiles of COLS_CL16_LANES_TX lanes (16 rows a block pass): packs of
#: the fewest elements (1, 2 or 4, at most what the rows allow) whose grid
#: has at most COLS_CL16_LANES_MAX_BLOCKS x SMs blocks, at the least NR of
#: (4, 8, 16) that holds the axis. Not at NR 16 with packs over
#: COLS_CL16_LANES_NR16_MAX_PACK elements, and where the rule above has a
#: plan, only at NR 16 with 1-element packs; else the rule above. H200
#: (kernels/cl16_lanes.txt): run 1, tools/cols_oracle.py --cl16 over the
#: grid's cases over 1.47x: such a plan was the best on the short axes, e.g.
#: bfloat16 (1000, 64) 1.42x -> 1.14x, float16 (2000, 500) 1.56x -> 1.26x;
#: run 2, the first form (any NR and pack, before the rule above) against
#: the plans without it, interleaved, softmax and log_softmax, on the 37 grid
#: shapes it moved and 40 held-out ones (L 600-4096): 259 of 308 faster by
#: over 0.03x, 34 slower, all of those at NR 16 with 2- or 4-element packs
#: (e.g. float16 (3000, 640) 1.36x -> 1.53x) or where the rule above had a
#: plan at NR 4 (float16 (2000, 100) 1.15x -> 1.20x), hence the exceptions.
COLS_CL16_LANES = True
COLS_CL16_LANES_MIN_L = 600
COLS_CL16_LANES_MAX_L = 4096
COLS_CL16_LANES_TX = 16
COLS_CL16_LANES_MAX_BLOCKS = 2.0
COLS_CL16_LANES_NR16_MAX_PACK = 2
#: Folded axes: a unit-stride length I that is not a multiple of the 16-byte
#: pack, on dense slabs with aligned pointers (e.g. (4000, 1001)), runs
#: softmax_cols_sync with 16-byte packs on the slab read as (L / f, I x f),
#: f = 16-byte pack / gcd(I, pack) (rows of whole packs), the f reshaped
#: columns of each original column merged after one barrier a slab
#: (_plan_cols_fold). Taken for arrays of at least COLS_FOLD_MIN_BYTES
#: (smaller ones: the narrow-pack cluster plans win) whose narrow packs would
#: be scalars (16-bit (4000, 1500), 8-byte packs: 1.49-1.64x folded against
#: 1.51-1.58x). H100 (tools/fold_try.py, tools/layout_table.py with and
#: without the rule, kernels/cols_fold.txt), softmax against the same data
#: contiguous: float32 (4000, 1001) 1.35x against 1.83x, (16384, 255) 1.48x
#: against 2.00x, (2000, 1001) 1.53x against 1.65x; 16-bit (4000, 1001)
#: 1.44-1.49x against 1.90-2.06x, (8000, 1001) 1.34-1.42x against 2.15x,
#: (16384, 255) 1.68-1.73x against 2.09-2.26x. NR: the largest of
#: COLS_FOLD_NR that runs (fewer splits: fewer partials to fold; NR 16 in
#: 126 blocks beat NR 4 / 8 in 252); tiles of 128 bytes, or 64 where a
#: thread would merge more than COLS_FOLD_MAX_MERGE_LOADS partials after the
#: barrier (16-bit (16384, 255): 1.59-1.71x against 1.70-1.79x).
COLS_FOLD_MIN_BYTES = 6 << 20
COLS_FOLD_NR = (16, 4)
COLS_FOLD_MAX_MERGE_LOADS = 4
#: Any dense array (smaller ones, and unit-stride lengths of 4- or 8-byte
#: packs) takes the fold where its plan would otherwise be the sync kernel
#: (narrow scalar packs or skewed 16-byte packs) in at least this many
#: rounds and the fold holds the slab in one (_fold_over_rounds; 0: never).
#: H100 (tools/layout_table.py with and without, kernels/fold_rounds.txt),
#: against the same data contiguous: every one of 41 such shapes faster,
#: e.g. 16-bit (3000, 1001) 1.86-2.18x -> 1.40-1.54x, (2600, 1002)
#: 1.90-2.20x -> 1.42-1.55x, (8000, 940) 1.88-1.90x -> 1.42-1.43x, (8192,
#: 257) 2.27-2.62x -> 1.69-1.88x; float32 (4000, 718) 1.80x -> 1.47x,
#: (1000, 3826) 1.55x -> 1.43x. Against one-round plans the fold loses
#: (bfloat16 (16384, 127) 1.45x against 1.77x, (2000, 3002) 1.50x against
#: 1.64x), so the test is the rounds, not the size or the pack.
COLS_FOLD_NARROW_ROUNDS = 2
#: Folded split stream (_plan_cols_split_fold): where a narrow-pack array on
#: dense slabs with aligned pointers would stream split with narrow packs
#: (the folded sync kernel cannot hold a slab at once, no cluster or sync
#: plan applies), the split stream runs on the slab read as (L / f, I x f)
#: with 16-byte packs, each finish block merging its columns' f reshaped
#: totals (FOLD), at COLS_SPLIT_FOLD_BLOCKS_PER_SM blocks an SM and the
#: finish kernel's unroll COLS_SPLIT_FOLD_UNROLL. H100
#: (tools/split_fold_try.py, kernels/split_fold.txt), softmax against the same
#: data contiguous, folded against the narrow-pack split stream: float32
#: (8000, 1001) 1.76x against 1.85x, (16384, 1001) 1.79x against 2.13x,
#: (8192, 4095) 1.89x against 2.21x, (30000, 1001) 1.51x against 1.84x,
#: (6000, 3001) 1.69x against 1.75x; bfloat16 (16384, 1001) 1.71x against
#: 2.20x, (8192, 4095) 1.89x against 2.41x, (6000, 3001) 2.09x against 2.26x,
#: (16384, 1002) 1.68x against 2.15x; float16 alike; log_softmax alike. 8
#: blocks an SM or unroll 4 won some shapes and lost others.
COLS_SPLIT_FOLD_BLOCKS_PER_SM = 16
COLS_SPLIT_FOLD_UNROLL = 8
#: Whole-width split stream (softmax_cols_wide_*, _plan_cols_wide): on sm_90,
#: one dense slab (O = 1) of float16 / bfloat16, same dtype in and out, of at
#: least COLS_WIDE_MIN_BYTES, whose rows (of at least COLS_WIDE_MIN_ROW_BYTES)
#: are off the 16-byte grid (fold_factor > 1) and, folded to rows of whole
#: 16-byte packs, at most COLS_WIDE_MAX_PACKS packs (a thread a pack column),
#: streams twice in chunks of whole rows: COLS_WIDE_BLOCKS_PER_SM blocks an SM
#: of at least COLS_WIDE_MIN_ROWS folded rows each, COLS_WIDE_UNROLL rows in
#: flight a thread. H100, softmax, time / the same data contiguous, against
#: the plan it replaces (tools/layout_table.py with and without the rule,
#: kernels/wide_stream.txt, the library runs): bfloat16 (16000, 1500) 1.52x
#: against 1.92x (split stream, fold 2), (20000, 1100) 1.60x / 1.89x, (24000,
#: 1502) 1.62x / 1.89x (fold 4), (50000, 1100) 1.56x / 1.69x, (12000, 2500)
#: 1.60x / 1.76x (skewed sync kernel), (12000, 3500) 1.69x / 1.87x, (6000,
#: 2500) 1.54x / 1.65x, (8400, 1500) 1.49x / 1.54x; float16 and log_softmax
#: alike. The sync kernel stays ahead on shorter axes: (4300, 3500) 1.42x
#: against 1.52x (2150 folded rows, 17 a block: hence COLS_WIDE_MIN_ROWS 20),
#: (9000, 1500) within 3% either way. Rows on the 16-byte grid stay on the
#: sync kernel, far ahead there (bfloat16 (8192, 4096) 1.18x against 1.7x);
#: rows of 600-1000 bytes lost in the prototype (the partials grow with the
#: grid); float32 won less there and lost at (6000, 2500) and (16000, 3000).
COLS_WIDE_DTYPES = ("float16", "bfloat16")
COLS_WIDE_MIN_BYTES = 24 << 20
COLS_WIDE_MIN_ROW_BYTES = 2048
COLS_WIDE_MAX_PACKS = 1024  # softmax.cu's COLS_WIDE_MAX_THREADS
COLS_WIDE_BLOCKS_PER_SM = 1
COLS_WIDE_MIN_ROWS = 20
COLS_WIDE_UNROLL = 8
#: Rows of at least COLS_WIDE_LONG_ROW_BYTES take the whole-width stream only
#: on axes of at least COLS_WIDE_LONG_ROW_MIN_L rows (shorter ones keep the
#: skewed sync kernel). H100 A/B (tools/layout_table.py; kernels/sync4_cl.txt,
#: runs 3-4), softmax against the same data contiguous, wide -> skewed sync:
#: bfloat16 (6000, 3500) 1.65-1.71x -> 1.44x, (6000, 3300) 1.61x -> 1.46x,
#: (5500, 3500) 1.60x -> 1.41x, (7000, 3500) 1.47x -> 1.40x, (7500, 3500)
#: 1.49x -> 1.39x, (8000, 3500) 1.57x -> 1.42x, float16 and log_softmax
#: alike. The stream kept its lead on narrower rows ((7000, 3100) 1.43x
#: against 1.52x, (6000, 2500) 1.58x against 1.62x) and from 9000 rows
#: ((9000, 3500) 1.67x against 1.72x, (9750, 3700) 1.64x against 1.71x,
#: (9500, 3900) 1.72x either way; (12000, 3500) 1.68x against 1.84x,
#: tools/cols_oracle.py).
COLS_WIDE_LONG_ROW_BYTES = 6600
COLS_WIDE_LONG_ROW_MIN_L = 8500
COLS_WIDE_MERGE_THREADS = 256  # a warp a column
#: Whole slab on chip (softmax_cols_slab, _choose_cols_slab): on sm_90, one
#: dense slab (O = 1) of float16 / bfloat16 / float32, same dtype in and out,
#: L x I a multiple of the 16-byte pack, read as contiguous 16-byte packs by a
#: cooperative grid of one block an SM (COLS_SLAB_THREADS threads) that holds
#: it whole in shared memory: each block folds its packs into per-column
#: (max, sum) partials as they arrive (a period of at most COLS_SLAB_SLOTS
#: elements, a multiple of lcm(I, pack), so a thread's packs keep their
#: columns), two grid barriers merge them, and each block writes its slab
#: back normalised. It replaces the plans that stream x twice (the split
#: stream, _plan_cols_split / _plan_cols_split_fold) or hold it in
#: COLS_SLAB_MIN_SYNC_ROUNDS or more rounds of the sync kernel, on axes of at
#: least COLS_SLAB_MIN_L rows. H200 (tools/layout_table.py with the rule on and
#: off; bench/results/nvidia-h200/kernels/slab.txt, call 2), softmax against the
#: same data contiguous, slab against the plan it replaces: bfloat16 (16000,
#: 300) 1.32x against 1.70x, (16000, 500) 1.32x / 1.66x (split stream, fold 2),
#: (12000, 768) 1.51x / 1.65x, (8000, 1500) 1.48x / 1.59x (sync, 2 rounds);
#: float32 (16000, 300) 1.21x / 1.54x, (12000, 384) 1.26x / 1.36x; held-out
#: shapes: faster on 40 of 42 (bfloat16 (14000, 700) 1.25x / 1.90x, (20000,
#: 450) 1.28x / 1.94x); float16 and log_softmax alike. Slower on 6000-row axes
#: (bfloat16 (6000, 1600) 1.65x / 1.55x: hence COLS_SLAB_MIN_L) and even at
#: (8000, 1200) (1.44x either way). In the prototype (slab.txt, run 4) the
#: one-round sync plans stayed ahead (bfloat16 (8000, 1024) 1.38x against
#: 1.20x, (16000, 200) 1.57x / 1.44x), as did the cluster plans (small arrays).
COLS_SLAB_DTYPES = ("float16", "bfloat16", "float32")
COLS_SLAB_THREADS = 512  # softmax.cu's COLS_SLAB_THREADS
COLS_SLAB_SLOTS = 4096  # softmax.cu's COLS_SLAB_SLOTS
COLS_SLAB_MIN_L = 7000
COLS_SLAB_MIN_SYNC_ROUNDS = 2
#: Skewed packs (softmax_cols_cl's SK form, _choose_cols_skew): on sm_90, a
#: same-dtype float16 / bfloat16 array whose unit-stride axis is off the
#: 16-byte grid (narrow packs otherwise) but whose x and y rows are off it
#: alike, with rows of at least COLS_SKEW_MIN_ROW_BYTES (by itemsize: the
#: itemsizes listed) and at least COLS_SKEW_MIN_BYTES in all, takes the
#: cluster kernel with packs of COLS_SKEW_PACK_BYTES on each row's own grid
#: (a tile loads TX packs a row and writes TX - 2), NR the first of
#: COLS_SKEW_NR that fits a cluster. H100 (tools/cols_skew_try.py,
#: tools/layout_table.py; kernels/cols_skew.txt), against the same data
#: contiguous, skewed against the plan before: bfloat16 (1000, 5001) 1.34x
#: against 1.62x (log 1.36x), (2000, 3001) 1.68x against 1.87x; float16
#: 1.44x against 1.78x, 1.67x against 1.90x. Ties or losses elsewhere: 16-bit
#: (333, 3001) 1.40-1.45x against 1.40-1.42x, (1000, 1001) 1.45-1.57x
#: against 1.24-1.40x; float32 (2000, 3001) 1.61x against 1.58x, (1000, 5001)
#: 1.47-1.53x against 1.57x but log_softmax 1.73x against 1.53x: float32
#: keeps the narrow plans.
COLS_SKEW_MIN_ROW_BYTES = {2: 6000}
COLS_SKEW_MIN_BYTES = 8 << 20
COLS_SKEW_PACK_BYTES = {2: 8, 4: 16}  # (float32: the experiments')
COLS_SKEW_NR = (8, 16)
#: Axes of at least COLS_SKEW_ONLY_WIDER_MIN_L rows take it only where its
#: packs are wider than the axis's own (``vec``): a 16-bit axis of a
#: multiple of 4 elements has 8-byte packs already, and skewed ones of that
#: width load two packs a row more than they write; they take the narrow
#: plans (8-byte packs, NR 32, clusters of 3-4). H100 (tools/layout_table.py
#: with and without, COLS_SKEW_ONLY_WIDER=False; kernels/fill4.txt, run 1),
#: softmax and log_softmax against the same data contiguous: (1500, 3500)
#: 1.67-1.73x -> 1.25-1.35x, (1200, 12004) 1.84-1.95x -> 1.30-1.40x, (1800,
#: 4004) 1.62-1.70x -> 1.44-1.62x. Shorter axes keep it: its NR 8 clusters
#: of 8 tied or won there ((1000, 4500) float16 1.38-1.40x against
#: 1.52-1.53x, (500, 12004) 1.40-1.53x against 1.39-1.53x).
COLS_SKEW_ONLY_WIDER = True
COLS_SKEW_ONLY_WIDER_MIN_L = 1200
#: Skewed 16-byte packs in the sync kernel (softmax_cols_sync's SK form,
#: _choose_cols_sync_skew): on sm_90, a same-dtype array of
#: COLS_SYNC_SK_DTYPES whose unit-stride axis is off the 16-byte grid but
#: whose x and y rows are off it alike takes softmax_cols_sync with 16-byte
#: packs on each row's own grid (NR COLS_SYNC_SK_NR at COLS_SYNC_SK_MINB
#: blocks an SM, tiles of COLS_SYNC_SK_SEGMENT bytes of which a row writes all
#: but two packs; one read of x, in rounds) where its axis splits over at most
#: COLS_SYNC_SK_MAX_SPLITS[itemsize] blocks and either its axes are at least
#: COLS_SYNC_SK_MIN_LI[itemsize] long (L, I; before the skewed cluster plan
#: and the narrow ones) or the array would otherwise stream split. H100
#: (tools/sync_skew_try.py, kernels/sync_skew.txt), softmax against the same
#: data contiguous, against the plan before: float32 (8000, 1001) 1.47x
#: against 1.78x, (16384, 1001) 1.67-1.70x against 1.78x, (8192, 4095) 1.60x
#: against 1.89x, (6000, 3001) 1.23x against 1.71x, (12000, 2001) 1.72x
#: against 1.90x, (2000, 3001) 1.46-1.49x against 1.57x; bfloat16 (8192,
#: 4095) 1.53x against 1.86x, (6000, 3001) 1.57x against 2.08x, (12000, 2001)
#: 1.58x against 1.89x, (2000, 3001) 1.52x against 1.70x; log_softmax alike.
#: Losses it is kept from: float32 (30000, 1001) (118 splits: 1.62x against
#: the folded split stream's 1.51x), bfloat16 (16384, 1001) (64 splits:
#: 1.79x against 1.68x), bfloat16 (1000, 5001) (1.52x against the cluster's
#: 1.40x), and the arrays the folded sync kernel holds ((4000, 1001): 1.74x
#: against 1.38x).
#: float32 on shorter axes of wide rows (a later run, 3 rounds): (1200, 4001)
#: 1.34x against the cluster's 1.73x, (1000, 5001) 1.54x against 1.64x,
#: (800, 6001) 1.53x against 1.68x, (1000, 3001) 1.32x against 1.48x, (1500,
#: 5001) 1.57x against 1.68x, (1000, 8001) 1.57x against 1.54x (log_softmax
#: 1.33-1.48x against 1.55-1.58x); float32 (1000, 1001) lost (1.56-1.74x
#: against 1.25-1.39x). float16 softmax alike (the run with the masks held in a register, which
#: is float16's form: (8192, 4095) 1.61-1.63x against 1.90-1.92x, (6000,
#: 3001) 1.66-1.68x against 2.11-2.15x, (2000, 3001) 1.54-1.59x against
#: 1.67-1.71x). float16 log_softmax was kept from it (COLS_SYNC_SK_NO_LOG)
#: while its NR 16 form spilled 8 bytes on sm_90; it no longer does (128
#: registers since the rows-a-split arguments) and takes it: H100
#: (kernels/f16_wide.txt), log_softmax against the same data contiguous,
#: (2000, 3001) 1.64-1.67x (cl sk4) -> 1.51-1.53x, (8192, 4095) 1.95x (split
#: fold8) -> 1.64x, (6000, 3001) 2.11-2.14x -> 1.56-1.57x, (12000, 2001)
#: 1.92-1.95x -> 1.75-1.76x.
COLS_SYNC_SK_DTYPES = ("float32", "bfloat16", "float16")
COLS_SYNC_SK_NO_LOG: tuple = ()  # (dtypes whose log_softmax does not take it)
COLS_SYNC_SK_NR = 16
COLS_SYNC_SK_MINB = 2
COLS_SYNC_SK_SEGMENT = 256
COLS_SYNC_SK_MAX_SPLITS = {4: 64, 2: 48}
COLS_SYNC_SK_MIN_LI = {4: (800, 3000), 2: (2000, 2000)}
#: Grid-stride kernels launch at most this many blocks per SM.
MAX_BLOCKS_PER_SM = 32
#: Allowed "packs per thread" values (template instantiations): a need is
#: rounded up to the next of these.
NP_LADDER = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: Coarser ladder for cluster kernels and scalar rows (fewer instantiations
#: to compile; the unused register slots are masked out).
NP_LADDER_COARSE = (1, 2, 4, 8, 16, 32)

ALGORITHMS = ("auto", "naive", "safe", "online")
_ALGO_ID = {"naive": "ALGO_NAIVE", "safe": "ALGO_SAFE", "online": "ALGO_ONLINE"}

#: C type names of the storage dtypes.
CTYPE = {"float16": "f16_t", "bfloat16": "bf16_t", "float32": "float", "float64": "double"}


@dataclass(frozen=True)
class DeviceInfo:
    """What the dispatcher needs to know about a GPU."""
    sm_count: int
    cc: int  # compute capability, e.g. 90
    #: opt-in shared memory per block in bytes (0: by compute capability)
    smem_block: int = 0

    @property
    def has_clusters(self) -> bool:
        return self.cc >= 90

    @property
    def max_smem(self) -> int:
        """Dynamic shared memory one block may use (bytes)."""
        if self.smem_block:
            return self.smem_block
        return {90: 227 * 1024, 100: 227 * 1024, 80: 163 * 1024, 87: 163 * 1024}.get(self.cc, 99 * 1024)

    @property
    def smem_rows_max_packs(self) -> int:
        """Longest row (packs) the smem kernel stages per block (2 stages)."""
        return min(SMEM_MAX_PACKS, self.max_smem // (SMEM_MAX_STAGES * VECTOR_BYTES))


@dataclass(frozen=True)
class LaunchPlan:
    """One to three kernel launches for a problem.

    ``kernel``/``grid``/``block`` is the main launch; the split regime has a
    first launch (``pre_kernel``, ``pre_grid``) that writes ``ws_elems``
    workspace values of ``ws_dtype``, and the whole-width strided stream a
    second one between them (``mid_kernel``, ``mid_grid``, ``mid_block``).
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
    smem: int = 0  # dynamic shared memory bytes of the main launch
    cluster: int = 1  # blocks per cluster of a persistent clustered grid (the
    # launcher caps the grid at the clusters the GPU can hold at once)
    sync: bool = False  # the kernel's last argument is the launcher's zeroed
    # per-stream barrier workspace (softmax_rowsync); launched cooperatively
    fallback: Optional["LaunchPlan"] = None  # what runs if a cooperative
    # launch is refused (the grid does not fit on the GPU at once)
    fold: int = 1  # softmax_cols_sync's FOLD: the (O, L, I) problem runs as
    # (O, L / fold, I * fold), whose columns the kernel folds back (the
    # fallback is a plan of the original problem)
    mid_kernel: Optional[str] = None  # a launch between pre_kernel and kernel
    mid_grid: Optional[tuple] = None  # (softmax_cols_wide_merge), block mid_block
    mid_block: Optional[tuple] = None

    def kernels(self):
        """Name expressions this plan may launch (for compile checks)."""
        own = [k for k in (self.pre_kernel, self.mid_kernel, self.kernel) if k]
        return own + (self.fallback.kernels() if self.fallback is not None else [])


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _ladder(n: int, ladder=None, cap=None) -> int:
    """Smallest allowed packs-per-thread value >= n (never above ``cap``)."""
    for v in (ladder or NP_LADDER):
        if n <= v:
            return v if cap is None else min(v, cap)
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


def _warp_np_max(in_dtype: str, out_dtype: str, pack: int, np_max: int) -> int:
    """Most packs a lane of the warp kernel holds: 16-bit rows leave the warp
    regime early (measured); mixed storage types cap lower (ptxas spills the
    full register budget there)."""
    if pack >= 8:
        return WARP_NP_MAX_16
    if in_dtype != out_dtype:
        return min(np_max, WARP_NP_MAX_MIXED)
    return np_max


def row_thresholds(in_dtype: str, out_dtype: str, dev: DeviceInfo, aligned: bool = True) -> dict:
    """Longest row (elements) each on-chip regime of ``plan_rows`` takes, for
    tests and docs: ``warp`` (from WARP_LONG_MIN_ROWS rows on, or
    WARP_LONG_MIN_ROWS_LOG for log-softmax; ``warp_few`` below
    WARP_LONG_MIN_ROWS, for 32-bit rows); ``block`` (a block's registers; few rows, and
    many rows of 32/64-bit data between the smem ranges); ``smem`` (many
    rows: shared memory of one block, or of a cluster of up to 8 on sm_90);
    ``cluster`` (sm_90, many rows of 32/64-bit data: registers of a cluster);
    and ``few_rows``, the row count below which rows are "few". The largest
    of these lengths is the longest row any many-rows regime keeps on chip.
    ``rowsync`` is the longest single row the one-launch few-rows kernel
    holds (spread over every SM), which it takes for up to ``rowsync_rows``
    rows (R rows get 1/R of the SMs each). ``cluster_waves`` (32-bit rows,
    sm_90) is the longest row few rows take as a cluster per row in several
    waves, from ``cluster_waves_rows`` rows on.

    With ``aligned=False`` a row may start mid-vector, costing up to
    ``pack - 1`` elements of capacity.
    """
    pack = pack_width(in_dtype, out_dtype) if aligned else 1
    np_max = reg_elems(in_dtype, out_dtype) // pack
    narrow = pack >= 8
    out = {
        "warp": 32 * _warp_np_max(in_dtype, out_dtype, pack, np_max) * pack,
        "block": MAX_BLOCK_THREADS * np_max * pack,
    }
    if pack == 4:  # fewer rows than WARP_LONG_MIN_ROWS(_LOG): shorter warp rows
        out["warp_few"] = 32 * min(WARP_NP_FEW, _warp_np_max(in_dtype, out_dtype, pack, np_max)) * pack
    if pack > 1 and numpy.dtype(_np_name(in_dtype)).itemsize * pack == VECTOR_BYTES:
        out["smem"] = (MAX_CLUSTER if dev.has_clusters else 1) * dev.smem_rows_max_packs * pack
    if dev.has_clusters and not narrow:
        out["cluster"] = MAX_CLUSTER * CLUSTER_THREADS * np_max * pack
    out["few_rows"] = FEW_ROWS_PER_SM * dev.sm_count
    if pack == 4 and dev.has_clusters:
        # few rows from cluster_waves_rows on: a cluster per row, several waves
        out["cluster_waves"] = MAX_CLUSTER * MAX_BLOCK_THREADS * np_max * pack
        out["cluster_waves_rows"] = FEW_CLUSTER_WAVES_MIN_ROWS
    if pack > 1:
        # rowsync (few rows, one launch): one row over every SM's registers
        out["rowsync"] = dev.sm_count * MAX_BLOCK_THREADS * np_max * pack
        out["rowsync_rows"] = dev.sm_count // ROWSYNC_MIN_BLOCKS
    return out


#: Keys of row_thresholds() that are not the longest row of a many-rows regime.
ROW_THRESHOLD_EXTRAS = ("few_rows", "rowsync", "rowsync_rows", "cluster_waves", "cluster_waves_rows")


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
    if pack == 1:
        np_max = min(np_max, SCALAR_NP_MAX)
    packs = _cdiv(L + (pack - 1 if (mis_possible and pack > 1) else 0), pack)
    src = "softmax.cu"
    wide_c = compute_itemsize(in_dtype, out_dtype) == 8
    sms = dev.sm_count
    narrow = pack >= 8  # 16-bit storage: twice the elements per byte moved

    if algorithm != "auto":
        # the paper's streaming forms, one block per row
        th = STREAM_THREADS_PAPER
        k = f"softmax_stream<{T}, {U}, {LG}, {_ALGO_ID[algorithm]}, {pack}, {STREAM_UNROLL}, {th}>"
        return LaunchPlan("stream", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (th,), pack)

    # warp: LANES lanes per row, about PACKS_PER_LANE packs each
    warp_max = 32 * _warp_np_max(in_dtype, out_dtype, pack, np_max)
    if pack == 4 and rows < WARP_LONG_MIN_ROWS:
        warp_max = min(warp_max, 32 * WARP_NP_FEW)
    elif pack == 4 and log and rows < WARP_LONG_MIN_ROWS_LOG:
        warp_max = min(warp_max, 32 * WARP_NP_LOG)
    if packs <= warp_max:
        one = narrow or (pack == 4 and rows < WARP_ONE_PACK_MAX_ROWS)
        lanes = min(32, _next_pow2(_cdiv(packs, 1 if one else PACKS_PER_LANE)))
        np_ = _ladder(_cdiv(packs, lanes), None if pack > 1 else NP_LADDER_COARSE)
        rows_per_block = WARP_KERNEL_THREADS // 32 * (32 // lanes)
        grid = min(_cdiv(rows, rows_per_block), sms * MAX_BLOCKS_PER_SM)
        k = f"softmax_warp<{T}, {U}, {LG}, {pack}, {np_}, {lanes}>"
        return LaunchPlan("warp", src, k, (grid,), (WARP_KERNEL_THREADS,), pack)

    # rows whose input and output disagree on vector alignment (a rare user
    # `out=` at an odd offset): scalar accesses, beyond a warp the stream kernel
    if pack == 1:
        return _plan_stream(rows, pack, T, U, LG, sms, wide_c)

    cluster_ok = dev.has_clusters
    # (log-softmax keeps x and its exponentials' sum: at 1024 threads and the
    # full budget ptxas spills on sm_80, so it holds at most LOG_BLOCK_NP_MAX)
    block_cap = MAX_BLOCK_THREADS * (min(np_max, LOG_BLOCK_NP_MAX) if log else np_max)

    # few long rows: split over (almost) every SM, one launch
    if packs > ROWSYNC_MIN_PACKS and rows * ROWSYNC_MIN_BLOCKS <= sms and rows <= ROWSYNC_MAX_ROWS:
        rs = _plan_rowsync(rows, packs, pack, min(np_max, LOG_BLOCK_NP_MAX) if log else np_max,
                           T, U, LG, sms, in_dtype, out_dtype)
        if rs is not None:
            return rs

    # few rows of block size: spread each row over a cluster (>= 4 SMs a row)
    if (cluster_ok and CLUSTER_MIN_PACKS_FEW < packs <= block_cap
            and sms // rows >= MIN_CLUSTER_FEW):
        cluster = min(MAX_CLUSTER, sms // rows,
                      _next_pow2(_cdiv(packs, CLUSTER_THREADS * PACKS_PER_THREAD_FEW)))
        cluster = 1 << (cluster.bit_length() - 1)
        np_ = _ladder(_cdiv(packs, cluster * CLUSTER_THREADS), NP_LADDER_COARSE, np_max)
        k = f"softmax_cluster<{T}, {U}, {LG}, {pack}, {np_}, {CLUSTER_THREADS}, {cluster}>"
        return LaunchPlan("cluster", src, k, (rows * cluster,), (CLUSTER_THREADS,), pack)

    few = rows < FEW_ROWS_PER_SM * sms

    def block_plan():
        ppt = PACKS_PER_THREAD_16 if (narrow and not few and packs > BLOCK_SMALL_PACKS_16) else PACKS_PER_THREAD
        if not narrow and not few and not log and packs >= BLOCK_FULL_PACKS:
            ppt = np_max  # fewer, fuller threads: two blocks an SM overlap their rows
        threads = min(MAX_BLOCK_THREADS, max(MIN_BLOCK_THREADS, _next_pow2(_cdiv(packs, ppt))))
        np_ = _ladder(_cdiv(packs, threads))
        k = f"softmax_block<{T}, {U}, {LG}, {pack}, {np_}, {threads}>"
        return LaunchPlan("block", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (threads,), pack)

    def smem_plan(cluster):
        cpk = _cdiv(packs, cluster)
        stages = max(2, min(SMEM_MAX_STAGES, min(SMEM_BYTES, dev.max_smem) // (cpk * VECTOR_BYTES)))
        # one block per SM, persistent; at least one cluster (GPUs with fewer SMs
        # than the cluster: the fake 2-SM device of the tests)
        grid = max(1, min(rows, sms // cluster)) * cluster
        k = f"softmax_smem<{T}, {U}, {LG}, {pack}, {SMEM_THREADS}, {cluster}, {stages}>"
        return LaunchPlan("smem", src, k, (grid,), (SMEM_THREADS,), pack, extra=(cpk,),
                          smem=stages * cpk * VECTOR_BYTES, cluster=cluster)

    # cp.async moves 16-byte input packs: the staged kernels need the input
    # to be the wider side
    in_isz = numpy.dtype(_np_name(in_dtype)).itemsize
    input_packs = in_isz * pack == VECTOR_BYTES

    # many rows of a few tens of KB: one row a block staged in shared memory
    # at full occupancy
    sm1 = FWD_SMEM1_ROW_BYTES.get(in_isz)
    if (sm1 and input_packs and rows >= FWD_SMEM1_MIN_ROWS_PER_SM * sms
            and sm1[0] <= packs * VECTOR_BYTES <= sm1[1]):
        shape = smem1_shape(packs * VECTOR_BYTES, dev)
        if shape is not None:
            th, minb = shape
            k = f"softmax_smem<{T}, {U}, {LG}, {pack}, {th}, 1, 1, {minb}>"
            return LaunchPlan("smem", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (th,), pack, extra=(packs,),
                              smem=packs * VECTOR_BYTES)

    # block: one block per row, row in registers
    if packs <= (BLOCK_FIRST_PACKS_16 if narrow else BLOCK_FIRST_PACKS) or (few and packs <= block_cap):
        return block_plan()
    # many rows of a few tens of KB: rows staged in shared memory, the next
    # row streaming in (cp.async) while this one is reduced and written
    many = rows >= SMEM_MIN_ROWS_PER_SM * sms and input_packs
    smax = dev.smem_rows_max_packs
    if many and pack > 1 and packs <= smax:
        return smem_plan(1)
    # log-softmax cannot take the full-register block (it spills there): rows
    # of at least BLOCK_FULL_PACKS packs, neither few nor many, stage in
    # shared memory instead. H100, float32 512 x 16384: smem 30.4-31.5 us vs
    # block 35.3 (tools/tune.py --log).
    if log and not narrow and not few and input_packs and BLOCK_FULL_PACKS <= packs <= smax:
        return smem_plan(1)
    if packs <= block_cap:  # (16-bit rows with many of them took smem above)
        return block_plan()
    if many and pack > 1 and cluster_ok and packs <= 2 * smax:
        return smem_plan(2)
    if many and pack > 1 and cluster_ok and packs <= MAX_CLUSTER * smax:
        return smem_plan(4 if packs <= 4 * smax else 8)
    # few long rows: a cluster per row when all of them fit on the GPU at
    # once (one read), else split each row over many blocks (two launches)
    if few:
        if rows >= sms // SPLIT_ROWS_DIV and cluster_ok:
            # the largest cluster that still fits every row at once
            fits = [c for c in (8, 4, 2) if packs <= c * MAX_BLOCK_THREADS * np_max
                    and rows <= cluster_fit_estimate(sms, c)]
            cl = None
            if fits:
                cl = fits[0]
                threads = MAX_BLOCK_THREADS if packs > cl * CLUSTER_THREADS * np_max else CLUSTER_THREADS
            elif pack == 4 and rows >= FEW_CLUSTER_WAVES_MIN_ROWS:
                # 32-bit rows, too many to fit at once: the smallest cluster whose
                # registers hold a row, in several waves (one read of x beats the
                # split's two from FEW_CLUSTER_WAVES_MIN_ROWS rows on)
                cl = next((c for c in (2, 4, 8) if packs <= c * MAX_BLOCK_THREADS * np_max), None)
                threads = MAX_BLOCK_THREADS
            if cl is not None:
                np_ = _ladder(_cdiv(packs, cl * threads), NP_LADDER_COARSE, np_max)
                k = f"softmax_cluster<{T}, {U}, {LG}, {pack}, {np_}, {threads}, {cl}>"
                return LaunchPlan("cluster", src, k, (rows * cl,), (threads,), pack)
        # 16-bit rows from FEW_STREAM_MIN_ROWS_16 rows on: one block per row
        # streaming twice (the re-read from L2) beats the split's two launches
        if narrow and rows >= FEW_STREAM_MIN_ROWS_16 and packs <= FEW_STREAM_MAX_PACKS_16:
            return _plan_stream(rows, pack, T, U, LG, sms, wide_c)
        return _plan_split(rows, packs, pack, T, U, LG, in_dtype, out_dtype, sms)

    # many long rows: a row over the registers of a cluster of blocks (16-bit
    # rows this long stream faster: measured)
    if cluster_ok and not narrow and packs <= MAX_CLUSTER * CLUSTER_THREADS * np_max:
        cluster = next(c for c in (2, 4, 8) if packs <= c * CLUSTER_THREADS * np_max)
        np_ = _ladder(_cdiv(packs, cluster * CLUSTER_THREADS), NP_LADDER_COARSE, np_max)
        k = f"softmax_cluster<{T}, {U}, {LG}, {pack}, {np_}, {CLUSTER_THREADS}, {cluster}>"
        nclusters = min(rows, max(1, (sms * MAX_BLOCKS_PER_SM) // cluster))
        return LaunchPlan("cluster", src, k, (nclusters * cluster,), (CLUSTER_THREADS,), pack)

    return _plan_stream(rows, pack, T, U, LG, sms, wide_c)


def smem1_shape(row_bytes: int, dev: DeviceInfo) -> Optional[tuple]:
    """(threads, launch-bound blocks an SM) of a one-row-a-block staged
    kernel for rows of ``row_bytes`` (SMEM1_SHAPES), or None if a row does
    not fit."""
    fit = min(SMEM_BYTES, dev.max_smem) // (row_bytes + 1024)
    return next((t[1:] for t in SMEM1_SHAPES if fit >= t[0]), None)


def cluster_fit_estimate(sms: int, cluster: int) -> int:
    """Clusters of `cluster` blocks (one per SM) the GPU holds at once, as the
    dispatcher assumes it: all SM pairs, but only ~7/8 of SMs / cluster for
    4 and 8 (GPCs whose SM count is not a multiple of the cluster size idle
    the rest: 30 of 33 clusters of 4 and 15 of 16 of 8 on a 132-SM H100)."""
    return sms // 2 if cluster <= 2 else (sms // cluster) * 7 // 8


def _plan_rowsync(rows, packs, pack, np_max, T, U, LG, sms, in_dtype, out_dtype) -> Optional[LaunchPlan]:
    """softmax_rowsync: each row over `splits` blocks (rows * splits <= SMs),
    row in registers (at most ``np_max`` packs a thread); None if a row does
    not fit. Its blocks wait for each other, so the launcher launches it
    cooperatively (all blocks resident, or the launch is refused); where the
    driver refuses it (another process or an MPS limit holds SMs) the plan's
    ``fallback``, the two-kernel split, runs instead."""
    splits = sms // rows
    per_block = _cdiv(packs, splits)
    threads = min(MAX_BLOCK_THREADS, max(MIN_BLOCK_THREADS,
                                         _next_pow2(_cdiv(per_block, ROWSYNC_PACKS_PER_THREAD))))
    if per_block > threads * np_max:
        return None
    np_ = _ladder(_cdiv(per_block, threads), NP_LADDER_COARSE, np_max)
    splits = _cdiv(packs, np_ * threads)
    k = f"softmax_rowsync<{T}, {U}, {LG}, {pack}, {np_}, {threads}>"
    return LaunchPlan("rowsync", "softmax.cu", k, (splits, rows), (threads,), pack, sync=True,
                      fallback=_plan_split(rows, packs, pack, T, U, LG, in_dtype, out_dtype, sms))


def _plan_stream(rows, pack, T, U, LG, sms, wide_c=False) -> LaunchPlan:
    """Online two-pass stream, one block per row (the re-read mostly hits L2).
    Double arithmetic gets half the threads (a 1024-thread block has only 64
    registers a thread)."""
    th = STREAM_THREADS_F64 if wide_c else STREAM_THREADS
    k = f"softmax_stream<{T}, {U}, {LG}, ALGO_ONLINE, {pack}, {STREAM_UNROLL}, {th}>"
    return LaunchPlan("stream", "softmax.cu", k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (th,), pack)


def _plan_split(rows, packs, pack, T, U, LG, in_dtype, out_dtype, sms) -> LaunchPlan:
    """Each row over `splits` blocks: partial (max, sum) kernel + finish kernel."""
    cap = max(1, _cdiv(packs, SPLIT_MIN_PACKS))
    splits = max(1, min(cap, _cdiv(SPLIT_BLOCKS_PER_SM * sms, rows)))
    pps = _cdiv(packs, splits)
    splits = _cdiv(packs, pps)
    cdt = "float64" if compute_itemsize(in_dtype, out_dtype) == 8 else "float32"
    C = CTYPE[cdt]
    pre = f"softmax_split_partial<{T}, {C}, {pack}, {STREAM_UNROLL}, {SPLIT_THREADS}>"
    k = f"softmax_split_finish<{T}, {U}, {LG}, {pack}, {STREAM_UNROLL}, {SPLIT_THREADS}>"
    return LaunchPlan("split", "softmax.cu", k, (splits, rows), (SPLIT_THREADS,), pack,
                      pre_kernel=pre, pre_grid=(splits, rows), ws_elems=2 * rows * splits,
                      ws_dtype=cdt, extra=(pps,))


def cols_prefers_copy(plan: LaunchPlan, O: int, L: int, I: int, dev: DeviceInfo) -> bool:
    """True when a cols plan streams the axis twice over fewer tiles than
    COLS_COPY_TILES_PER_SM x SMs: too few blocks to reach the memory system,
    so a transposing copy to rows (and back) is faster."""
    if plan.pre_kernel or plan.sync or "softmax_cols_cl" in plan.kernel:  # the axis split over blocks
        return False
    if "softmax_cols_staged" in plan.kernel:
        # one read, but fewer blocks than half the SMs cannot reach the memory system
        return plan.grid[0] * 2 < dev.sm_count
    tx = plan.extra[0]
    two_pass = L > plan.block[0] // tx * COLS_CAP
    return two_pass and O * _cdiv(I, tx) < COLS_COPY_TILES_PER_SM * dev.sm_count


def _plan_cols_staged(O, L, I, T, U, LG, isz, osz, wide_c, dev, vec) -> Optional[LaunchPlan]:
    """softmax_cols_staged: the tile (W elements of I by L) parked in shared
    memory by one block or, on sm_90, split over a cluster of blocks. Options
    are tried in the order measured best on H100 (tools/tune_cols.py): row
    segments of COLS_STAGE_SEGMENT bytes halving to 64 held by one block,
    then by a pair of blocks, then 32-byte segments by one block or a pair;
    only then clusters of 4 and 8; an option must give blocks for at least
    3/4 of the SMs where any does. 16-byte
    packs of a tile small enough to double-buffer go by cp.async. None:
    nothing fits."""
    budget = min(COLS_STAGE_BYTES, dev.max_smem)
    vmax = VECTOR_BYTES // max(isz, osz)
    v = vmax if vec >= vmax else 1  # full vectors, or scalar
    # W = TX * v with TX <= 32 lanes
    w_top = max(1, min(COLS_STAGE_SEGMENT // isz, _next_pow2(I), 32 * v))
    w_min = min(w_top, max(1, 32 // isz))
    widths = []
    w = w_top
    while w >= w_min:
        widths.append(w)
        w //= 2
    wide = [w for w in widths if w * isz >= 64] or widths[:1]
    narrow = [w for w in widths if w not in wide]
    order = [(w, 1) for w in wide]
    if dev.has_clusters:
        order += [(w, 2) for w in wide] + [(w, c) for w in narrow for c in (1, 2)]
        order += [(w, c) for c in (4, 8) for w in widths]
    else:
        order += [(w, 1) for w in narrow]
    fits = [(w, c) for w, c in order if _cdiv(L, c) * w * isz <= budget]
    if not fits:
        return None
    busy = [(w, c) for w, c in fits if 4 * O * _cdiv(I, w) * c >= 3 * dev.sm_count]
    W, c = (busy or fits)[0]
    if W % v:
        v = 1
    th = COLS_STAGE_THREADS_F64 if wide_c else COLS_STAGE_THREADS
    tile = _cdiv(L, c) * W * isz
    stages = 2 if (c == 1 and v * isz == VECTOR_BYTES and 2 * tile <= budget) else 0
    smem = max(stages, 1) * tile
    tiles = O * _cdiv(I, W)
    if c == 1:
        per_sm = max(1, min((dev.max_smem + 1024) // (smem + 1024), 2048 // th))
        grid = min(tiles, dev.sm_count * per_sm)
    else:  # persistent clusters: the launcher caps the grid at what fits
        grid = min(tiles, dev.sm_count) * c
    k = f"softmax_cols_staged<{T}, {U}, {LG}, {v}, {th}, {stages}, {c}>"
    return LaunchPlan("cols", "softmax.cu", k, (grid,), (th,), 1, extra=(W // v,), smem=smem, cluster=c)


def _plan_cols_split(O, L, I, in_dtype, out_dtype, log, dev, vec, segment=COLS_SPLIT_SEGMENT,
                     blocks_per_sm=COLS_SPLIT_BLOCKS_PER_SM, unroll=COLS_SPLIT_UNROLL, fold=1) -> LaunchPlan:
    """softmax_cols_split_partial + _finish: tiles of W = TX x VEC elements of
    I (at most ``segment`` bytes, full 16-byte vectors where ``vec`` allows),
    the axis split so that tiles x splits fill ``blocks_per_sm`` blocks per
    SM, each block streaming at least COLS_SPLIT_MIN_SWEEPS unrolled sweeps
    of its rows. ``fold`` > 1: (O, L, I) is a reshaped problem (as
    _plan_cols_fold's) whose finish kernel merges each original column's
    ``fold`` reshaped columns (the kernel's FOLD; the launcher passes fI =
    I / fold)."""
    T, U = CTYPE[in_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    osz = numpy.dtype(_np_name(out_dtype)).itemsize
    cdt = "float64" if compute_itemsize(in_dtype, out_dtype) == 8 else "float32"
    vmax = VECTOR_BYTES // max(isz, osz)
    v = vmax if vec >= vmax else 1
    th = COLS_SPLIT_THREADS
    w = max(v, min(segment // isz, _next_pow2(I), 32 * v))
    tx = w // v
    tiles = O * _cdiv(I, w)
    ny = th // tx
    most = max(1, _cdiv(L, ny * unroll * COLS_SPLIT_MIN_SWEEPS))
    splits = max(1, min(_cdiv(blocks_per_sm * dev.sm_count, tiles), most, 65535))
    lps = _cdiv(L, splits)
    splits = _cdiv(L, lps)
    C = CTYPE[cdt]
    # the partial kernel keeps two groups of packs in flight: at 64 registers
    # 16-byte packs fit 4 deep for float, 2 deep for 16-bit or double
    if cdt == "float64":  # double arithmetic: at most 4 rows in flight (8 spill)
        unroll = min(unroll, 4)
    pre_unroll = unroll if v == 1 else min(unroll, 4 if (isz == 4 and cdt == "float32") else 2)
    pre = f"softmax_cols_split_partial<{T}, {C}, {v}, {th}, {pre_unroll}>"
    k = f"softmax_cols_split_finish<{T}, {U}, {LG}, {v}, {th}, {unroll}" + (", true>" if fold > 1 else ">")
    # workspace: partials, then per-tile totals (the per-tile counters are
    # in the launcher's zeroed workspace)
    ws = 2 * tiles * splits * w + 2 * tiles * w
    return LaunchPlan("cols", "softmax.cu", k, (tiles, splits), (th,), 1, pre_kernel=pre,
                      pre_grid=(tiles, splits), ws_elems=ws, ws_dtype=cdt, extra=(tx, lps, tiles), fold=fold)


def _cols_sync_balance(L, ny, tiles, splits, grid, cap, max_splits) -> tuple:
    """(splits, grid) of a sync plan with the most splits, up to
    ``max_splits``, in no more rounds than ``splits`` (the fewest the plan's
    NR allows) take; the fewest splits of the same packs a thread (see
    COLS_SYNC_BALANCE)."""
    rounds = _cdiv(tiles * splits, grid)
    rows = _cdiv(L, ny)  # the axis's groups of ny rows
    best = splits
    for nrs in range(_cdiv(rows, splits) - 1, 0, -1):  # fewer packs a thread ...
        s = _cdiv(rows, nrs)  # ... in the fewest splits that give them
        if s > min(max_splits, cap) or _cdiv(tiles, cap // s) > rounds:
            break
        best = s
    if best == splits:
        return splits, grid
    return best, min((cap // best) * best, tiles * best)


def _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=None, pf=None,
                    min_rounds=1, segment=COLS_SPLIT_SEGMENT, v=None, fold=1,
                    sk=False, minb=None, balance=None, max_splits=COLS_SYNC_MAX_SPLITS) -> Optional[LaunchPlan]:
    """softmax_cols_sync: the split stream's tiles in one cooperative launch,
    x read once (rows held in registers). ``nr``: packs a thread (one of
    COLS_SYNC_NR; None: of those splitting the axis over at most
    COLS_SYNC_NR_MAX_SPLITS[nr] blocks, the smallest whose grid fits at
    once, else the largest in rounds). None when a tile's blocks cannot all
    be resident or more than COLS_SYNC_MAX_ROUNDS rounds would be needed.
    ``pf``: prefetch each block's next item into shared memory (None: yes;
    False only for tools/tune_cols_sync.py); ``min_rounds``: at most 1 /
    min_rounds of the tiles a round; ``segment``: a tile's bytes of I (both
    for tuning). ``fold`` > 1: (O, L, I) is a reshaped problem (see
    _plan_cols_fold) whose slabs (all tiles of one o) meet at one barrier,
    so a round holds whole slabs. Its ``fallback`` (a refused cooperative
    launch) is the split stream. ``sk``: skewed 16-byte packs (the kernel's
    SK: x's and y's rows off the pack grid alike, the caller checks; each
    tile writes W - 2 packs of its W / 16-byte lanes, so tiles of at least
    4 packs). ``minb``: the kernel's blocks an SM (None: COLS_SYNC_MINB).
    ``balance``: more splits than NR needs where that balances the rounds
    (None: COLS_SYNC_BALANCE; 16-byte packs only, never for ``fold`` > 1,
    nor with ``min_rounds``), up to ``max_splits`` blocks a tile."""
    T, U = CTYPE[in_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    osz = numpy.dtype(_np_name(out_dtype)).itemsize
    vmax = VECTOR_BYTES // max(isz, osz)
    if sk:
        if isz != osz or fold > 1:
            return None
        v = vmax
    if v is None:
        v = vmax if vec >= vmax else 1
        if v * isz != VECTOR_BYTES:
            return None  # 16-byte packs of x (cp.async)
    elif (v > vec and not sk) or v > vmax:
        return None
    if v * isz != VECTOR_BYTES:
        pf = False  # (cp.async moves 16-byte packs)
    if compute_itemsize(in_dtype, out_dtype) == 8:
        return None  # float arithmetic only
    th = COLS_SYNC_THREADS
    w = max(v, min(segment // isz, _next_pow2(I), 32 * v))
    tx = w // v
    ny = th // tx
    if sk and tx < 4:
        return None
    tiles = O * (_cdiv(I + v - 1, w - 2 * v) if sk else _cdiv(I, w))
    group = _cdiv(I, w) if fold > 1 else 1  # tiles that meet at one barrier
    choice = None
    # a block's static reduction buffer: WARPS x COLS_SPLIT_W_MAX (m, d) floats
    static = (th // 32) * 256 * 8 + 1024
    for r in (COLS_SYNC_NR if nr is None else (nr,)):
        splits = _cdiv(L, ny * r)
        if nr is None and splits > COLS_SYNC_NR_MAX_SPLITS[r]:
            continue
        smem = r * th * VECTOR_BYTES if (pf is None or pf) else 0
        # blocks an SM holds: the registers' bound, and the shared memory's
        # (an SM has about one block's opt-in maximum + 1 KiB)
        per_sm = min(minb or COLS_SYNC_MINB[r], (dev.max_smem + 1024) // (smem + static))
        cap = per_sm * dev.sm_count
        unit = splits * group
        if unit > cap:  # (also: not one block fits)
            continue
        per_round = (cap // unit) * unit
        if min_rounds > 1:  # fewer blocks, each streaming several items
            per_round = min(per_round, _cdiv(tiles // group, min_rounds) * unit)
        choice = (r, splits, min(per_round, tiles * splits), cap)
        if tiles * splits <= cap:
            break
    if choice is None:
        return None
    r, splits, grid, cap = choice
    if balance is None:
        balance = COLS_SYNC_BALANCE and min_rounds == 1
    if (balance and fold == 1 and v * isz == VECTOR_BYTES
            and _cdiv(tiles * splits, grid) >= COLS_SYNC_BALANCE_MIN_ROUNDS):
        splits, grid = _cols_sync_balance(L, ny, tiles, splits, grid, cap,
                                          min(max_splits, COLS_SYNC_NR_MAX_SPLITS.get(r, COLS_SYNC_MAX_SPLITS),
                                              COLS_SYNC_BALANCE_SPLITS * splits, COLS_SYNC_BALANCE_MAX_SPLITS))
    rounds = _cdiv(tiles * splits, grid)
    if rounds > COLS_SYNC_MAX_ROUNDS:
        return None
    pf = True if pf is None else pf
    k = f"softmax_cols_sync<{T}, {U}, {LG}, {v}, {th}, {r}, {minb or COLS_SYNC_MINB[r]}, {'true' if pf else 'false'}"
    k += ", true>" if fold > 1 else (", false, true>" if sk else ">")
    fb = None if fold > 1 else _plan_cols_split(O, L, I, in_dtype, out_dtype, log, dev, vec)
    return LaunchPlan("cols", "softmax.cu", k, (grid,), (th,), 1, ws_elems=2 * tiles * splits * w,
                      smem=r * th * VECTOR_BYTES if pf else 0,
                      ws_dtype="float32", extra=(tx, splits, tiles, r), sync=True,
                      fallback=fb, fold=fold)


def _pack_elems(in_dtype: str, out_dtype: str) -> int:
    """Elements of a 16-byte pack of the wider of the two dtypes."""
    return VECTOR_BYTES // max(numpy.dtype(_np_name(in_dtype)).itemsize, numpy.dtype(_np_name(out_dtype)).itemsize)


def fold_factor(I: int, in_dtype: str, out_dtype: str) -> int:
    """The rows of an (L, I) slab that make one row of whole 16-byte packs:
    pack / gcd(I, pack) (1: I is already a multiple of the pack)."""
    v = _pack_elems(in_dtype, out_dtype)
    return v // math.gcd(I, v)


def _plan_cols_fold(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=None) -> Optional[LaunchPlan]:
    """softmax_cols_sync's FOLD form for an axis whose unit-stride length I
    is not a multiple of the 16-byte pack, on dense slabs (the caller checks:
    row stride I, slab stride L x I, 16-byte-aligned pointers): the slab (L,
    I) runs as (L / f, I x f), f = fold_factor, whose rows are whole 16-byte
    packs; the kernel merges the f reshaped columns of each original column
    (one barrier a slab: a round holds whole slabs). None where L is not a
    multiple of f, the slab's blocks do not fit at once, or the sync kernel
    does not apply (16-byte packs of x, float arithmetic, at most
    COLS_SYNC_MAX_SPLITS blocks a tile). Its fallback (a refused
    cooperative launch) is the split stream of the original problem."""
    v, f = _pack_elems(in_dtype, out_dtype), fold_factor(I, in_dtype, out_dtype)
    if f == 1 or L % f:
        return None
    L2, I2 = L // f, I * f

    def merge_loads(p):  # partials a thread merges after the barrier: f x splits over THREADS / W
        return f * p.extra[1] * p.extra[0] * v // COLS_SYNC_THREADS

    p = None
    for r in (COLS_FOLD_NR if nr is None else (nr,)):  # the largest NR that runs
        for seg in (COLS_SPLIT_SEGMENT, COLS_SPLIT_SEGMENT // 2):
            q = _plan_cols_sync(O, L2, I2, in_dtype, out_dtype, log, dev, v, nr=r, fold=f, segment=seg)
            if q is None or q.extra[1] > COLS_SYNC_MAX_SPLITS:
                continue
            if p is None:
                p = q
            elif merge_loads(q) < merge_loads(p):  # (narrower tiles: a lighter merge)
                p = q
            if merge_loads(p) <= COLS_FOLD_MAX_MERGE_LOADS:
                break
        if p is not None:
            break
    if p is None:
        return None
    return dataclasses.replace(p, fallback=_plan_cols_split(O, L, I, in_dtype, out_dtype, log, dev, vec))


def _plan_cols_split_fold(O, L, I, in_dtype, out_dtype, log, dev) -> Optional[LaunchPlan]:
    """The split stream's FOLD form (see COLS_SPLIT_FOLD_BLOCKS_PER_SM) on
    dense slabs (the caller checks, as for _plan_cols_fold): a plan of the
    reshaped problem (L / f, I x f), or None where I is a multiple of the
    pack or L is not a multiple of f."""
    f = fold_factor(I, in_dtype, out_dtype)
    if f == 1 or L % f:
        return None
    return _plan_cols_split(O, L // f, I * f, in_dtype, out_dtype, log, dev, _pack_elems(in_dtype, out_dtype),
                            blocks_per_sm=COLS_SPLIT_FOLD_BLOCKS_PER_SM, unroll=COLS_SPLIT_FOLD_UNROLL, fold=f)


def _plan_cols_wide(O, L, I, in_dtype, out_dtype, log, dev, dense) -> Optional[LaunchPlan]:
    """softmax_cols_wide_*: the slab (L, I) whose rows are off the 16-byte
    grid as (L / f, I x f) rows of whole 16-byte packs (f = fold_factor > 1),
    streamed twice in chunks of whole rows (see COLS_WIDE_MIN_BYTES). A plan
    of the reshaped problem (``fold`` = f); None where it does not apply.
    ``extra`` = (G, rows a block, packs a row)."""
    if (dev.cc < 90 or not dense or O != 1 or in_dtype != out_dtype or in_dtype not in COLS_WIDE_DTYPES):
        return None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    f = fold_factor(I, in_dtype, out_dtype)
    if (f == 1 or L % f or L * I * isz < COLS_WIDE_MIN_BYTES or I * isz < COLS_WIDE_MIN_ROW_BYTES
            or I * f * isz > COLS_WIDE_MAX_PACKS * VECTOR_BYTES
            or (I * isz >= COLS_WIDE_LONG_ROW_BYTES and L < COLS_WIDE_LONG_ROW_MIN_L)):
        return None
    Lf, pf = L // f, I * f * isz // VECTOR_BYTES
    G = dev.sm_count * COLS_WIDE_BLOCKS_PER_SM
    if Lf < COLS_WIDE_MIN_ROWS * G:
        return None
    rpc = _cdiv(Lf, G)
    G = _cdiv(Lf, rpc)
    T, LG, u = CTYPE[in_dtype], "true" if log else "false", COLS_WIDE_UNROLL
    return LaunchPlan("cols", "softmax.cu", f"softmax_cols_wide_finish<{T}, {LG}, {u}>", (G,), (_cdiv(pf, 32) * 32,),
                      pre_kernel=f"softmax_cols_wide_partial<{T}, {u}>", pre_grid=(G,),
                      mid_kernel=f"softmax_cols_wide_merge<{LG}>", mid_grid=(_cdiv(I, COLS_WIDE_MERGE_THREADS // 32),),
                      mid_block=(COLS_WIDE_MERGE_THREADS,), ws_elems=2 * (G * I * f + I), ws_dtype="float32",
                      extra=(G, rpc, pf), fold=f)


def cols_slab_shape(L: int, I: int, in_dtype: str, dev: DeviceInfo) -> Optional[tuple]:
    """softmax_cols_slab's layout of a dense (L, I) slab: (packs a block,
    threads that read (PS), dynamic shared memory bytes), or None where the
    slab does not fit the GPU's shared memory or no period of at most
    COLS_SLAB_SLOTS elements (a multiple of lcm(I, pack)) exists."""
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    pack = VECTOR_BYTES // isz
    if (L * I) % pack:
        return None
    lcm = I * pack // math.gcd(I, pack)
    periods = min(COLS_SLAB_THREADS * pack, COLS_SLAB_SLOTS) // lcm
    if periods == 0:
        return None
    ps = periods * lcm // pack
    ppb = _cdiv(L * I // pack, dev.sm_count)
    smem = ppb * VECTOR_BYTES + 8 * (I + ps * pack)  # the slab, I totals, the period's partials
    if smem > dev.max_smem:
        return None
    return ppb, ps, smem


def _choose_cols_slab(base: LaunchPlan, O, L, I, in_dtype, out_dtype, log, dev, dense) -> Optional[LaunchPlan]:
    """softmax_cols_slab (see COLS_SLAB_DTYPES) in place of ``base`` where
    the rule applies and the slab fits, with ``base`` as its fallback (run
    where the cooperative launch is refused); else None."""
    if (dev.cc < 90 or not dense or O != 1 or in_dtype != out_dtype or in_dtype not in COLS_SLAB_DTYPES
            or L < COLS_SLAB_MIN_L):
        return None
    name = base.kernel.split("<", 1)[0]
    split = name == "softmax_cols_split_finish"
    rounds = name == "softmax_cols_sync" and base.sync and _sync_rounds(base) >= COLS_SLAB_MIN_SYNC_ROUNDS
    if not (split or rounds):
        return None
    p = _plan_cols_slab(L, I, in_dtype, log, dev)
    return None if p is None else dataclasses.replace(p, fallback=base)


def _plan_cols_slab(L, I, in_dtype, log, dev) -> Optional[LaunchPlan]:
    """softmax_cols_slab's plan for a dense (L, I) slab of ``in_dtype`` (out
    the same), whatever the rule; None where it does not fit
    (``cols_slab_shape``). ``extra`` = (packs a block, PS)."""
    shape = cols_slab_shape(L, I, in_dtype, dev)
    if shape is None:
        return None
    ppb, ps, smem = shape
    G = dev.sm_count
    LG = "true" if log else "false"
    return LaunchPlan("cols", "softmax.cu", f"softmax_cols_slab<{CTYPE[in_dtype]}, {LG}>", (G,),
                      (COLS_SLAB_THREADS,), VECTOR_BYTES // numpy.dtype(_np_name(in_dtype)).itemsize,
                      ws_elems=2 * (I * G + I), ws_dtype="float32", extra=(ppb, ps), smem=smem, sync=True)


def _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=None,
                  segment=COLS_SPLIT_SEGMENT, nt=1, v=None, sk=False,
                  clusters=COLS_CL_CLUSTERS, minb=None) -> Optional[LaunchPlan]:
    """softmax_cols_cl: a cluster of 1-8 blocks a tile (16: _choose_cols_cl16), rows in registers,
    partials exchanged through distributed shared memory (sm_90, same-dtype
    float16 / bfloat16 / float32 with 16-byte packs of x and y). ``nr``: packs
    a thread (None: the smallest of COLS_CL_NR whose cluster has at most
    COLS_CL_FIRST_CLUSTER blocks, else at most 8); ``nt``: tiles a cluster
    (the kernel's NT; 2 was slower everywhere measured, tools/cl_phase.py
    --nt, so the dispatcher keeps 1); ``sk``: skewed packs of ``v``
    elements (the kernel's SK: rows off the v-element grid, x and y skewed
    alike; the caller checks), a tile writing two packs fewer a row than it
    loads; ``clusters``: the cluster sizes it may take (the smallest that
    holds the axis); ``minb``: blocks an SM (None: COLS_CL_MINB[nr]). None
    where it does not apply."""
    if (dev.cc < 90 or in_dtype != out_dtype or in_dtype not in COLS_CL_DTYPES):
        return None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    if v is None:
        v = VECTOR_BYTES // isz
    if (vec < v and not sk) or v * isz > VECTOR_BYTES:
        return None
    w = max(v, min(segment // isz, _next_pow2(I), 32 * v))
    tx = w // v
    if sk and tx < 4:
        return None
    ny = COLS_CL_THREADS // tx
    tiles = O * (_cdiv(I + v - 1, w - 2 * v) if sk else _cdiv(I, w))
    if tiles > COLS_CL_MAX_TILES or w > COLS_CL_W_MAX:  # grid.y; the kernel's tile arrays
        return None

    def cluster(r):
        need = _cdiv(L, ny * r)
        return next((c for c in clusters if c >= need), None)
    if nr is None:
        first = COLS_CL_FIRST_CLUSTER[isz]
        nr = next((r for r in COLS_CL_NR if (cluster(r) or 99) <= first),
                  next((r for r in COLS_CL_NR if cluster(r) is not None), None))
        if nr is None:
            return None
    cl = cluster(nr)
    if cl is None:
        return None
    T = CTYPE[in_dtype]
    k = (f"softmax_cols_cl<{T}, {T}, {'true' if log else 'false'}, {v}, {COLS_CL_THREADS}, {nr}, {cl}, "
         f"{minb or COLS_CL_MINB[nr]}, {nt}{', true' if sk else ''}>")
    return LaunchPlan("cols", "softmax.cu", k, (cl, _cdiv(tiles, nt)), (COLS_CL_THREADS,), 1,
                      extra=(tx, cl, tiles, nr))


def _choose_cols_cl16(O, L, I, in_dtype, out_dtype, log, dev, vec) -> Optional[LaunchPlan]:
    """The softmax_cols_cl plan in clusters of 16 blocks for a small 16-bit
    array (see COLS_CL16_MAX_BYTES), or None where the rule does not apply."""
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    if (isz != 2 or vec * isz < COLS_CL16_MIN_PACK_BYTES or not COLS_CL16_MIN_L <= L <= COLS_CL16_MAX_L
            or O * L * I * isz > COLS_CL16_MAX_BYTES):
        return None
    grid = min(vec * isz, VECTOR_BYTES)  # the rows' grid in bytes
    sector = grid == VECTOR_BYTES and (I * isz) % 32 == 0
    narrow, wide = COLS_CL16_MAX_TILES[(grid, sector)]
    if grid == VECTOR_BYTES and not sector and L >= COLS_CL16_LONG_MIN_L:
        narrow = COLS_CL16_LONG_OFF_SECTOR_TILES
    seg = COLS_CL16_SEGMENT
    if O * _cdiv(I, seg // isz) > narrow:
        seg = COLS_CL16_WIDE_SEGMENT
        if O * _cdiv(I, seg // isz) > wide:
            return None
    v = vec // 2
    w = max(v, min(seg // isz, _next_pow2(I), 32 * v))
    rows = 16 * (COLS_CL_THREADS // (w // v))  # the cluster's rows at NR 1
    nr = next((r for r in (4, 8, 16, 32) if rows * r >= L), 64)
    if nr > COLS_CL16_MAX_NR[v * isz] and vec * isz == VECTOR_BYTES:  # whole 16-byte packs: half the NR
        v, nr = vec, nr // 2
    if nr > COLS_CL16_MAX_NR[v * isz]:
        return None
    return _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=nr, v=v, segment=seg, clusters=(16,))


def _choose_cols_cl16_lanes(O, L, I, in_dtype, out_dtype, log, dev, vec, c16=None) -> Optional[LaunchPlan]:
    """The softmax_cols_cl plan in clusters of 16 on COLS_CL16_LANES_TX-lane
    tiles for a short axis of a small 16-bit array (see COLS_CL16_LANES),
    or None where the rule does not apply; ``c16``: the plan of
    ``_choose_cols_cl16`` (None: it has none)."""
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    if (not COLS_CL16_LANES or isz != 2 or not COLS_CL16_LANES_MIN_L <= L <= COLS_CL16_LANES_MAX_L
            or O * L * I * isz > COLS_CL16_MAX_BYTES):
        return None
    tx = COLS_CL16_LANES_TX
    rows = 16 * (COLS_CL_THREADS // tx)  # the cluster's rows at NR 1
    nr = next((r for r in (4, 8, 16) if rows * r >= L), None)
    if nr is None:
        return None
    for v in (1, 2, 4):
        if v > vec or 16 * O * _cdiv(I, tx * v) > COLS_CL16_LANES_MAX_BLOCKS * dev.sm_count:
            continue
        if (nr == 16 and v > COLS_CL16_LANES_NR16_MAX_PACK) or (c16 is not None and (nr, v) != (16, 1)):
            return None
        return _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=nr, v=v, segment=tx * v * isz,
                             clusters=(16,))
    return None


def _choose_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec) -> Optional[LaunchPlan]:
    """The softmax_cols_cl plan plan_cols takes, or None (the measured rule:
    8-byte packs at COLS_CL_HALF_NR for float32 and for 16-bit arrays over
    COLS_CL_MAX_BYTES where their tile fits a small cluster; else arrays of
    at most COLS_CL_MAX_BYTES; 16-bit tiles, and float32 tiles of axes
    shorter than a sync block's rows, that fit a cluster of at most
    COLS_CL_16_MAX_CLUSTER blocks at NR = COLS_CL_16_NR)."""
    cl = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec)
    if cl is None:
        return None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    nbytes = O * L * I * isz
    big = nbytes > COLS_CL_MAX_BYTES
    if isz == 4 or big:  # half packs (see COLS_CL_HALF_NR)
        half = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, COLS_CL_HALF_NR, v=VECTOR_BYTES // 2 // isz)
        most = COLS_CL_HALF_MAX_CLUSTER[isz]
        if isz == 4 and log:
            most = COLS_CL_HALF_LOG_MAX_CLUSTER
        elif isz == 2 and nbytes > COLS_CL_HALF_16_C4_MAX_BYTES:
            most = 2
        if (half is not None and half.extra[1] <= most
                and _blocks(half) >= COLS_CL_HALF_MIN_BLOCKS * dev.sm_count):
            return half
    if not big:
        return cl
    if isz == 2 or L < COLS_SYNC_THREADS // cl.extra[0] * COLS_SYNC_NR[-1]:
        c16 = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, COLS_CL_16_NR)
        if c16 is not None and c16.extra[1] <= COLS_CL_16_MAX_CLUSTER:
            return c16
    return None


def _choose_cols_skew(O, L, I, in_dtype, out_dtype, log, dev, vec=1) -> Optional[LaunchPlan]:
    """The skewed-pack softmax_cols_cl plan (see COLS_SKEW_MIN_ROW_BYTES) or
    None (also where ``vec``, the axis's own pack, is as wide and the axis
    long: COLS_SKEW_ONLY_WIDER). The caller checks that x's and y's rows
    are off the pack grid alike."""
    if dev.cc < 90 or in_dtype != out_dtype or in_dtype not in COLS_CL_DTYPES:
        return None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    if (isz not in COLS_SKEW_MIN_ROW_BYTES or I * isz < COLS_SKEW_MIN_ROW_BYTES[isz]
            or O * L * I * isz < COLS_SKEW_MIN_BYTES
            or (COLS_SKEW_ONLY_WIDER and vec * isz >= COLS_SKEW_PACK_BYTES[isz]
                and L >= COLS_SKEW_ONLY_WIDER_MIN_L)):
        return None
    v = COLS_SKEW_PACK_BYTES[isz] // isz
    for nr in COLS_SKEW_NR:
        p = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, 1, nr=nr, v=v, sk=True)
        if p is not None:
            return p
    return None


def _choose_cols_sync_skew(O, L, I, in_dtype, out_dtype, log, dev) -> Optional[LaunchPlan]:
    """The skewed-pack softmax_cols_sync plan (see COLS_SYNC_SK_DTYPES) or
    None: sm_90, same dtype (for log_softmax not COLS_SYNC_SK_NO_LOG's), at
    least one block's rows, at most COLS_SYNC_SK_MAX_SPLITS blocks a tile.
    The caller checks that x's and y's rows are off the pack grid alike, and
    where it wins."""
    if dev.cc < 90 or in_dtype != out_dtype or in_dtype not in COLS_SYNC_SK_DTYPES:
        return None
    if log and in_dtype in COLS_SYNC_SK_NO_LOG:
        return None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    p = _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, 1, nr=COLS_SYNC_SK_NR,
                        segment=COLS_SYNC_SK_SEGMENT, sk=True, minb=COLS_SYNC_SK_MINB,
                        max_splits=COLS_SYNC_SK_MAX_SPLITS[isz])
    if p is None:
        return None
    tx, splits, _, nr = p.extra
    if splits > COLS_SYNC_SK_MAX_SPLITS[isz] or L < COLS_SYNC_THREADS // tx * nr:
        return None
    return p


def _blocks(p: LaunchPlan) -> int:
    """Blocks of a plan's main grid."""
    return p.grid[0] * (p.grid[1] if len(p.grid) > 1 else 1)


def _sync_rounds(p: LaunchPlan) -> int:
    """Rounds of a softmax_cols_sync plan: its tiles x splits items over its grid."""
    return _cdiv(p.extra[2] * p.extra[1], p.grid[0])


def _choose_cols_narrow(O, L, I, in_dtype, out_dtype, log, dev, vec) -> Optional[LaunchPlan]:
    """The plan for packs narrower than 16 bytes (see COLS_NARROW_NR): a
    softmax_cols_cl plan (packs and NR chosen over COLS_CL_CLUSTERS, then the
    smallest cluster of COLS_NARROW_CLUSTERS, blocks an SM by
    COLS_NARROW_MINB), a softmax_cols_sync plan in at most
    COLS_NARROW_SYNC_MAX_ROUNDS rounds, or None (the split stream). sm_90,
    same-dtype COLS_CL_DTYPES only (the caller checks)."""
    best = None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    wide = vec if isz == 2 and vec * isz == COLS_NARROW_PACK_BYTES else 1
    for v, nr in ((v, nr) for v in sorted({wide, 1}, reverse=True) for nr in COLS_NARROW_NR):
        p = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=nr, v=v, segment=COLS_NARROW_SEGMENT)
        if p is None or (nr > 16 and p.extra[1] == 1):  # (NR 32 alone spills at 2 blocks an SM)
            continue
        blocks = _blocks(p)
        if blocks >= COLS_NARROW_MIN_BLOCKS * dev.sm_count:  # the first with enough blocks
            best = (blocks, v, nr)
            break
        if best is None or blocks > best[0]:  # else the one with the most
            best = (blocks, v, nr)
    if best is not None:  # those packs and NR in the smallest cluster of COLS_NARROW_CLUSTERS
        p = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=best[2], v=best[1],
                          segment=COLS_NARROW_SEGMENT, clusters=COLS_NARROW_CLUSTERS,
                          minb=COLS_NARROW_MINB.get((in_dtype, best[1], best[2])))
        if best[1] == 1:
            return p
        if COLS_CL_SMALL_NARROW:
            p = _cols_cl_small(p, O, L, I, in_dtype, out_dtype, log, dev, vec, v=best[1], nrs=COLS_CL_SMALL_NARROW_NR,
                               div=COLS_CL_SMALL_NARROW_DIV, clusters=COLS_NARROW_CLUSTERS)
        return _cols_fill4(p, O, L, I, in_dtype, out_dtype, log, dev, vec)
    sy = _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=COLS_NARROW_SYNC_NR, v=1)
    if (sy is not None and sy.extra[1] <= COLS_SYNC_MAX_SPLITS and L >= COLS_SYNC_THREADS // sy.extra[0] * sy.extra[3]
            and _sync_rounds(sy) <= COLS_NARROW_SYNC_MAX_ROUNDS):
        return sy
    return None


def _cols_fill4(p, O, L, I, in_dtype, out_dtype, log, dev, vec) -> LaunchPlan:
    """``p``, or, where ``p`` is a 16-bit plan of 8-byte packs (narrow-pack
    cluster or sync) or a float32 one of 16-byte packs (cluster or sync;
    other packs keep ``p``) of an array of COLS_FILL4_DTYPES of at least
    COLS_FILL4_MIN_BYTES, and ``p`` has under COLS_FILL4_MAX_BLOCKS x SMs
    blocks, the cluster plan of 4-byte packs on
    full COLS_FILL4_SEGMENT-byte tiles at NR COLS_FILL4_NR (where no cluster
    of 8 holds the axis and ``p`` is a sync plan, at COLS_FILL4_LONG_NR for
    COLS_FILL4_LONG_DTYPES), where it has at least ``p``'s blocks and at most
    COLS_FILL4_MAX_GRID (COLS_FILL4_LONG_MAX_GRID) x SMs."""
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    b = _blocks(p)
    if (not COLS_FILL4 or in_dtype not in COLS_FILL4_DTYPES or O * L * I * isz < COLS_FILL4_MIN_BYTES
            or (vec * isz != COLS_NARROW_PACK_BYTES if isz == 2 else vec * isz < VECTOR_BYTES)  # (measured packs)
            or b >= COLS_FILL4_MAX_BLOCKS * dev.sm_count):
        return p
    v, cap = 4 // isz, COLS_FILL4_MAX_GRID
    q = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=COLS_FILL4_NR, v=v, segment=COLS_FILL4_SEGMENT,
                      clusters=COLS_NARROW_CLUSTERS, minb=COLS_NARROW_MINB.get((in_dtype, v, COLS_FILL4_NR)))
    if q is None and p.sync and in_dtype in COLS_FILL4_LONG_DTYPES:  # (an axis over NR 16's clusters of 8)
        q = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=COLS_FILL4_LONG_NR, v=v,
                          segment=COLS_FILL4_SEGMENT, clusters=COLS_NARROW_CLUSTERS,
                          minb=COLS_NARROW_MINB.get((in_dtype, v, COLS_FILL4_LONG_NR)))
        cap = COLS_FILL4_LONG_MAX_GRID
    if (q is None or q.extra[0] * 4 != COLS_FILL4_SEGMENT  # (I narrower than a tile: not measured)
            or not b <= _blocks(q) <= cap * dev.sm_count):
        return p
    return q


def _cols_cl_fill(p, O, L, I, in_dtype, out_dtype, log, dev, vec) -> LaunchPlan:
    """``p`` (the cluster or sync plan of a 16-byte-pack axis), or the
    filled-grid softmax_cols_cl plan in its place (see COLS_CL_FILL) where
    ``p``'s blocks load the SMs unevenly (the busiest SM holds over
    COLS_CL_FILL_IMBALANCE x the mean: more blocks than SMs but not about a
    multiple, or fewer than SMs / COLS_CL_FILL_IMBALANCE), ``p`` is a sync
    plan or a cluster plan of fewer blocks than SMs, and a cluster plan of
    COLS_CL_FILL_BLOCKS x SMs blocks exists (more than ``p``'s, for a
    cluster plan)."""
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    if (not COLS_CL_FILL or dev.cc < 90 or in_dtype != out_dtype or in_dtype not in COLS_CL_FILL_DTYPES
            or vec * isz != VECTOR_BYTES or L > COLS_CL_FILL_MAX_L or O * L * I * isz > COLS_CL_FILL_MAX_BYTES
            or p.fold != 1):
        return p
    b, sms = _blocks(p), dev.sm_count
    if (_cdiv(b, sms) * sms <= COLS_CL_FILL_IMBALANCE * b
            or not (p.sync or (p.kernel.startswith("softmax_cols_cl<") and b < sms))):
        return p
    lo, hi = (f * sms for f in COLS_CL_FILL_BLOCKS)
    for seg in COLS_CL_FILL_SEGMENTS:
        for nr in COLS_CL_NR:
            q = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=nr, segment=seg)
            if q is not None and lo <= _blocks(q) <= hi and (p.sync or _blocks(q) > b):
                return q
    return p


def _cols_few_blocks(O, L, I, in_dtype, dev, blocks, div=None) -> bool:
    """Whether an (O, L, I) array of at most COLS_CL_SMALL_MAX_BYTES has a plan
    of at most SMs / ``div`` blocks (default COLS_CL_SMALL_DIV[itemsize]; no
    other itemsize qualifies): the small-array forms' condition."""
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    div = div or COLS_CL_SMALL_DIV.get(isz)
    return div is not None and O * L * I * isz <= COLS_CL_SMALL_MAX_BYTES and blocks <= dev.sm_count // div


def _cols_cl_small(p, O, L, I, in_dtype, out_dtype, log, dev, vec, v=None, nrs=None, div=None,
                   clusters=COLS_CL_CLUSTERS) -> LaunchPlan:
    """``p`` (the cluster or sync plan of a 16-byte-pack axis), or, for
    arrays of at most COLS_CL_SMALL_MAX_BYTES whose ``p`` has at most SMs /
    COLS_CL_SMALL_DIV[itemsize] blocks, the cluster plan on the narrowest tiles of
    COLS_CL_SMALL_SEGMENTS whose axis needs a cluster of more than 4 blocks
    (8; 6 or 8 of COLS_NARROW_CLUSTERS for the narrow-pack form: ``v``,
    ``nrs``, ``div``, ``clusters``) at an NR of COLS_CL_SMALL_NR, where that
    has more blocks than ``p``."""
    blocks = _blocks(p)
    if not COLS_CL_SMALL or in_dtype != out_dtype or not _cols_few_blocks(O, L, I, in_dtype, dev, blocks, div):
        return p
    for seg in COLS_CL_SMALL_SEGMENTS:
        for nr in nrs or COLS_CL_SMALL_NR:
            minb = COLS_NARROW_MINB.get((in_dtype, v, nr)) if v is not None else None
            q = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=nr, segment=seg, v=v, minb=minb,
                              clusters=clusters)
            if q is not None and q.extra[1] > 4:  # (the smallest cluster holding the axis: 6 or 8)
                return q if _blocks(q) > blocks else p
    return p


def _cols_sync_small(p, O, L, I, in_dtype, out_dtype, log, dev, vec) -> LaunchPlan:
    """``p`` (a sync plan of a 16-byte-pack axis), or, where it has at most
    SMs / COLS_CL_SMALL_DIV[itemsize] blocks on an array of at most
    COLS_CL_SMALL_MAX_BYTES, the sync plan at NR 4 on tiles of
    COLS_SYNC_SMALL_SEGMENT bytes if that has more blocks, one round and at
    most COLS_SYNC_BALANCE_MAX_SPLITS blocks a tile (more splits lost:
    bfloat16 (65536, 64) at 256 splits 1.76x against 1.31x)."""
    if not COLS_SYNC_SMALL or not _cols_few_blocks(O, L, I, in_dtype, dev, p.grid[0]):
        return p
    q = _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=4, segment=COLS_SYNC_SMALL_SEGMENT)
    if (q is None or q.grid[0] <= p.grid[0] or q.extra[1] > COLS_SYNC_BALANCE_MAX_SPLITS
            or _sync_rounds(q) > 1):
        return p
    return q


def _fold_over_rounds(p, O, L, I, in_dtype, out_dtype, log, dev, vec, dense) -> LaunchPlan:
    """``p`` (a narrow-pack or skewed-pack plan), or the folded sync kernel
    in its place where ``p`` is a sync plan in at least
    COLS_FOLD_NARROW_ROUNDS rounds, the slabs are dense and the fold runs in
    fewer rounds (one, for one slab), whatever the array's size and pack
    width. Before the fold, a scalar sync plan of COLS_NARROW_SYNC8_DTYPES
    on 8-byte packs takes the 8-byte-pack sync plan where that runs in one
    round (see COLS_NARROW_SYNC8_DTYPES)."""
    if (not dense or not p.sync or p.fold != 1 or not COLS_FOLD_NARROW_ROUNDS
            or _sync_rounds(p) < COLS_FOLD_NARROW_ROUNDS):
        return p
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    scalars = p.kernel.split("<", 1)[1].split(", ")[3] == "1"  # (not a skewed sync plan's 16-byte packs)
    if scalars and in_dtype in COLS_NARROW_SYNC8_DTYPES and vec * isz == COLS_NARROW_PACK_BYTES:
        q = _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=COLS_NARROW_SYNC8_NR, v=vec,
                            segment=COLS_NARROW_SYNC8_SEGMENT)
        if q is not None and _sync_rounds(q) == 1:
            return q
    fp = _plan_cols_fold(O, L, I, in_dtype, out_dtype, log, dev, vec)
    return fp if fp is not None and _sync_rounds(fp) < _sync_rounds(p) else p


def plan_cols(O: int, L: int, I: int, in_dtype: str, out_dtype: str, log: bool,
              dev: DeviceInfo, vec: int = 1, dense: bool = False, skew: bool = False) -> LaunchPlan:
    """Plan for the (O, L, I) layout, reduction along L, unit-stride I.

    Small 16-bit arrays take the cluster plan in clusters of 16 blocks
    (``_choose_cols_cl16``, see COLS_CL16_MAX_BYTES; short axes on tiles of
    16 lanes, ``_choose_cols_cl16_lanes``, see COLS_CL16_LANES), with the plan below as
    its ``fallback``: the launcher runs that where the GPU cannot hold a
    cluster of 16 (a non-portable size). Dense slabs that ``_plan_cols_base``
    would stream twice or hold in several sync rounds take the whole-slab
    kernel (``_choose_cols_slab``, see COLS_SLAB_DTYPES), with that plan as
    its fallback. Every other array: ``_plan_cols_base``."""
    base = _plan_cols_base(O, L, I, in_dtype, out_dtype, log, dev, vec, dense, skew)
    slab = _choose_cols_slab(base, O, L, I, in_dtype, out_dtype, log, dev, dense)
    if slab is not None:
        return slab
    c16 = _choose_cols_cl16(O, L, I, in_dtype, out_dtype, log, dev, vec)
    c16 = _choose_cols_cl16_lanes(O, L, I, in_dtype, out_dtype, log, dev, vec, c16) or c16
    return base if c16 is None else dataclasses.replace(c16, fallback=base)


def _plan_cols_base(O: int, L: int, I: int, in_dtype: str, out_dtype: str, log: bool,
                    dev: DeviceInfo, vec: int = 1, dense: bool = False, skew: bool = False) -> LaunchPlan:
    """plan_cols without its clusters of 16.

    ``vec`` is the widest vector (elements along I) the pointers, strides and
    I allow (a power of two; 1 always works). Axes up to COLS_REGS_MAX_L
    take ``softmax_cols`` (in registers, one read); on sm_90, same-dtype
    16-bit / float32 axes with 16-byte packs whose tile fits a cluster's
    registers take ``softmax_cols_cl`` where measured faster (small arrays,
    16-bit tiles over two blocks: ``_choose_cols_cl``), and those with
    narrower packs the narrow-pack plans (``_choose_cols_narrow``: the
    cluster kernel, the sync kernel in two rounds, else the split stream); longer axes with 16-byte
    packs of x and float arithmetic, at least one sync block's rows long and
    split over at most COLS_SYNC_MAX_SPLITS blocks a tile, take
    ``softmax_cols_sync`` (one launch, one read); other longer float32 / float64
    axes of COLS_SPLIT_BELOW_L .. COLS_SPLIT_FROM_L whose tile fits
    ``COLS_STAGE_BYTES`` of shared memory over enough tiles take
    ``softmax_cols_staged`` (one read); every other long axis streams twice
    with the axis split over blocks (``softmax_cols_split_*``, the second
    read mostly from L2). ``dense``: the slabs are dense (row stride I, slab
    stride L x I, or one slab) and both pointers 16-byte aligned, so an I
    that is not a multiple of the pack may take the folded sync kernel
    (``_plan_cols_fold``: scalar narrow packs, arrays of at least
    COLS_FOLD_MIN_BYTES; any array whose narrow-pack or skewed sync plan
    would take COLS_FOLD_NARROW_ROUNDS rounds), and where the narrow-pack plans would stream
    split, the folded split stream (``_plan_cols_split_fold``). Small
    arrays whose cluster or sync plan has few blocks take narrower tiles
    (``_cols_cl_small``, ``_cols_sync_small``), small and mid 16-bit
    arrays whose plan loads the SMs unevenly a filled cluster grid
    (``_cols_cl_fill``), 16-bit arrays of 8-byte packs and float32 ones
    whose plan has under one block an SM 4-byte-pack tiles (``_cols_fill4``),
    and float32 sync plans at NR 4 the NR 8 cluster plan (COLS_SYNC4_CL_*).
    ``skew``:
    x's and y's rows (and slabs) are off the 16-byte grid alike (same offset
    modulo the pack), so narrow-pack arrays may take skewed packs
    (``_choose_cols_skew``) or the sync kernel's skewed form
    (``_choose_cols_sync_skew``: before the skewed cluster plan where both
    axes are at least COLS_SYNC_SK_MIN_LI long, else where the array would
    stream split). Before all of these, large dense 16-bit slabs (O = 1) of
    long rows off the 16-byte grid take the whole-width split stream
    (``_plan_cols_wide``, see COLS_WIDE_MIN_BYTES)."""
    T, U = CTYPE[in_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    osz = numpy.dtype(_np_name(out_dtype)).itemsize
    wide_c = compute_itemsize(in_dtype, out_dtype) == 8
    # lanes along I: a full 128-byte line when there is enough parallelism,
    # down to one 32-byte sector per row of the tile when tiles are few
    tx = min(32, _next_pow2(I))
    min_tx = min(tx, max(1, 32 // isz))
    while tx > min_tx and O * _cdiv(I, tx) < 2 * dev.sm_count:
        tx //= 2
    threads = COLS_THREADS
    max_threads = COLS_MAX_THREADS_F64 if wide_c else COLS_MAX_THREADS
    if L > COLS_REGS_MAX_L:
        wd = _plan_cols_wide(O, L, I, in_dtype, out_dtype, log, dev, dense)
        if wd is not None:
            return wd
        if (dense and vec == 1 and not wide_c and O * L * I * isz >= COLS_FOLD_MIN_BYTES):
            fp = _plan_cols_fold(O, L, I, in_dtype, out_dtype, log, dev, vec)
            if fp is not None:
                return fp
        if vec * isz < VECTOR_BYTES and dev.cc >= 90 and in_dtype == out_dtype and in_dtype in COLS_CL_DTYPES:
            ssk = _choose_cols_sync_skew(O, L, I, in_dtype, out_dtype, log, dev) if skew else None
            if ssk is not None and L >= COLS_SYNC_SK_MIN_LI[isz][0] and I >= COLS_SYNC_SK_MIN_LI[isz][1]:
                return _fold_over_rounds(ssk, O, L, I, in_dtype, out_dtype, log, dev, vec, dense)
            sk = _choose_cols_skew(O, L, I, in_dtype, out_dtype, log, dev, vec) if skew else None
            if sk is not None:
                return sk
            nw = _choose_cols_narrow(O, L, I, in_dtype, out_dtype, log, dev, vec)
            if nw is None and ssk is not None:  # (rather than a split stream)
                nw = ssk
            if nw is not None:
                nw = _fold_over_rounds(nw, O, L, I, in_dtype, out_dtype, log, dev, vec, dense)
                return _cols_fill4(nw, O, L, I, in_dtype, out_dtype, log, dev, vec) if nw.sync else nw
            if dense:
                nw = _plan_cols_split_fold(O, L, I, in_dtype, out_dtype, log, dev)
            return nw if nw is not None else _plan_cols_split(O, L, I, in_dtype, out_dtype, log, dev, vec)
        cl = _choose_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec)
        if cl is not None:
            cl = _cols_fill4(_cols_cl_small(cl, O, L, I, in_dtype, out_dtype, log, dev, vec),
                             O, L, I, in_dtype, out_dtype, log, dev, vec)  # (float32; 16-bit: the next)
            return _cols_cl_fill(cl, O, L, I, in_dtype, out_dtype, log, dev, vec)
        sy = _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, vec)
        if sy is not None:
            tx_, splits, tiles_, nr_ = sy.extra
            if L >= COLS_SYNC_THREADS // tx_ * nr_ and splits <= COLS_SYNC_MAX_SPLITS:
                seg = COLS_SYNC_SEGMENT.get(isz, COLS_SPLIT_SEGMENT)
                if seg != COLS_SPLIT_SEGMENT and _cdiv(tiles_ * splits, sy.grid[0]) >= COLS_SYNC_BALANCE_MIN_ROUNDS:
                    wide = _plan_cols_sync(O, L, I, in_dtype, out_dtype, log, dev, vec, segment=seg)
                    off = (dense and (I * isz) % 32 and wide is not None
                           and _sync_rounds(wide) <= COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_ROUNDS * _sync_rounds(sy))
                    most = COLS_SYNC_SEGMENT_OFF_SECTOR_MAX_SPLITS if off else COLS_SYNC_SEGMENT_MAX_SPLITS
                    if wide is not None and wide.extra[1] <= most:
                        return wide
                if nr_ == 4 and in_dtype in COLS_SYNC4_CL_DTYPES:
                    q = _plan_cols_cl(O, L, I, in_dtype, out_dtype, log, dev, vec, nr=COLS_SYNC4_CL_NR,
                                      segment=COLS_SYNC4_CL_SEGMENT)
                    if q is not None and _blocks(q) <= COLS_SYNC4_CL_MAX_GRID * dev.sm_count:
                        return q
                sm = _cols_cl_small(sy, O, L, I, in_dtype, out_dtype, log, dev, vec)
                sm = sm if sm is not sy else _cols_sync_small(sy, O, L, I, in_dtype, out_dtype, log, dev, vec)
                sm = _cols_fill4(sm, O, L, I, in_dtype, out_dtype, log, dev, vec)  # (float32; 16-bit: the next)
                return _cols_cl_fill(sm, O, L, I, in_dtype, out_dtype, log, dev, vec)
        st = None
        if (in_dtype, out_dtype) in COLS_STAGED_PAIRS:
            st = _plan_cols_staged(O, L, I, T, U, LG, isz, osz, wide_c, dev, vec)
        if (st is None or isz == 2 or L < COLS_SPLIT_BELOW_L or L >= COLS_SPLIT_FROM_L
                or cols_prefers_copy(st, O, L, I, dev)):
            return _plan_cols_split(O, L, I, in_dtype, out_dtype, log, dev, vec)
        return st
    while threads < max_threads and L > (threads // tx) * COLS_CAP:
        threads *= 2
    tiles = O * _cdiv(I, tx)
    grid = min(tiles, dev.sm_count * MAX_BLOCKS_PER_SM)
    k = f"softmax_cols<{T}, {U}, {LG}, {COLS_CAP}, {threads}>"
    return LaunchPlan("cols", "softmax.cu", k, (grid,), (threads,), 1, extra=(tx,))


#: Row lengths (in packs) where plan_rows / plan_backward_rows thresholds sit:
#: the compile-check enumerations probe each +-1.
_PROBE_PACKS = (BLOCK_FIRST_PACKS, BLOCK_FIRST_PACKS_16, BLOCK_SMALL_PACKS_16, SMEM_MAX_PACKS,
                2 * SMEM_MAX_PACKS, 4 * SMEM_MAX_PACKS, 8 * SMEM_MAX_PACKS,
                SMEM_BYTES // (3 * VECTOR_BYTES), 2 * (SMEM_BYTES // (3 * VECTOR_BYTES)),
                4 * (SMEM_BYTES // (3 * VECTOR_BYTES)), 8 * (SMEM_BYTES // (3 * VECTOR_BYTES)),
                CLUSTER_MIN_PACKS_FEW)


def _probe_rows(dev: DeviceInfo) -> tuple:
    """Row counts around every row-count threshold, for the enumerations."""
    return (1, 2, 8, 14, 15, 28, 29, 33, 65, 67, dev.sm_count - 1, dev.sm_count,
            SMEM_MIN_ROWS_PER_SM * dev.sm_count - 1, WARP_LONG_MIN_ROWS, WARP_LONG_MIN_ROWS_LOG,
            10 ** 6)


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
                    for npk in _PROBE_PACKS:
                        Ls.update((npk * pack - 1, npk * pack, npk * pack + 1))
                    Ls.add(10 ** 7)
                    for L in sorted(Ls):
                        for rows in _probe_rows(dev):
                            for mis in (False, True):
                                for algo in ALGORITHMS:
                                    p = plan_rows(rows, L, ti, to, log, dev, algo, vec, mis)
                                    for kname in p.kernels():
                                        found[(p.source, kname)] = None
                    vmax = VECTOR_BYTES // max(numpy.dtype(_np_name(ti)).itemsize,
                                               numpy.dtype(_np_name(to)).itemsize)
                    for L in (1, 2, 100, 200, 10 ** 4, 10 ** 6):  # every softmax_cols block, split variant
                        for I in (1, 3, 64, 4096):
                            for v in sorted({1, vmax}) if vec else (1,):
                                p = plan_cols(7, L, I, ti, to, log, dev, v)
                                for kname in p.kernels():
                                    found[(p.source, kname)] = None
                    if vec:  # every softmax_cols_sync variant (16-byte packs of x, float arithmetic)
                        isz = numpy.dtype(_np_name(ti)).itemsize
                        v = VECTOR_BYTES // max(isz, numpy.dtype(_np_name(to)).itemsize)
                        if v * isz == VECTOR_BYTES and compute_itemsize(ti, to) == 4:
                            LG = "true" if log else "false"
                            for r in COLS_SYNC_NR:
                                k = (f"softmax_cols_sync<{CTYPE[ti]}, {CTYPE[to]}, {LG}, {v}, "
                                     f"{COLS_SYNC_THREADS}, {r}, {COLS_SYNC_MINB[r]}, true>")
                                found[("softmax.cu", k)] = None
                            for r in COLS_FOLD_NR:  # (FOLD: _plan_cols_fold)
                                k = (f"softmax_cols_sync<{CTYPE[ti]}, {CTYPE[to]}, {LG}, {v}, "
                                     f"{COLS_SYNC_THREADS}, {r}, {COLS_SYNC_MINB[r]}, true, true>")
                                found[("softmax.cu", k)] = None
                    if vec and dev.cc >= 90 and ti == to and ti in COLS_CL_DTYPES:  # every softmax_cols_cl variant
                        T = CTYPE[ti]
                        v = VECTOR_BYTES // numpy.dtype(_np_name(ti)).itemsize
                        for r in COLS_CL_NR:
                            for c in COLS_CL_CLUSTERS:
                                k = (f"softmax_cols_cl<{T}, {T}, {'true' if log else 'false'}, {v}, "
                                     f"{COLS_CL_THREADS}, {r}, {c}, {COLS_CL_MINB[r]}, 1>")
                                found[("softmax.cu", k)] = None
                        r = COLS_CL_HALF_NR  # (8-byte packs)
                        for c in COLS_CL_CLUSTERS:
                            k = (f"softmax_cols_cl<{T}, {T}, {'true' if log else 'false'}, {v // 2}, "
                                 f"{COLS_CL_THREADS}, {r}, {c}, {COLS_CL_MINB[r]}, 1>")
                            found[("softmax.cu", k)] = None
                    if dev.cc >= 90 and ti == to and ti in COLS_CL_DTYPES:  # the narrow-pack cl / sync variants
                        T, LG = CTYPE[ti], "true" if log else "false"
                        isz = numpy.dtype(_np_name(ti)).itemsize
                        for v in sorted({1, COLS_NARROW_PACK_BYTES // isz if isz == 2 else 1}):
                            for r in COLS_NARROW_NR:
                                for c in COLS_NARROW_CLUSTERS:
                                    if r > 16 and c == 1:
                                        continue
                                    k = (f"softmax_cols_cl<{T}, {T}, {LG}, {v}, {COLS_CL_THREADS}, {r}, {c}, "
                                         f"{COLS_NARROW_MINB.get((ti, v, r), COLS_CL_MINB[r])}, 1>")
                                    found[("softmax.cu", k)] = None
                        v = 4 // isz  # 4-byte packs (_cols_fill4; float32: scalars, as above)
                        for r in (COLS_FILL4_NR,) + ((COLS_FILL4_LONG_NR,) if ti in COLS_FILL4_LONG_DTYPES else ()):
                            for c in (COLS_NARROW_CLUSTERS if ti in COLS_FILL4_DTYPES else ()):
                                if r > 16 and c == 1:
                                    continue
                                k = (f"softmax_cols_cl<{T}, {T}, {LG}, {v}, {COLS_CL_THREADS}, {r}, {c}, "
                                     f"{COLS_NARROW_MINB.get((ti, v, r), COLS_CL_MINB[r])}, 1>")
                                found[("softmax.cu", k)] = None
                        v = COLS_SKEW_PACK_BYTES[isz] // isz  # skewed packs (_choose_cols_skew)
                        for r in (COLS_SKEW_NR if isz in COLS_SKEW_MIN_ROW_BYTES else ()):
                            for c in COLS_CL_CLUSTERS:
                                k = (f"softmax_cols_cl<{T}, {T}, {LG}, {v}, {COLS_CL_THREADS}, {r}, {c}, "
                                     f"{COLS_CL_MINB[r]}, 1, true>")
                                found[("softmax.cu", k)] = None
                        r = COLS_NARROW_SYNC_NR  # (scalars)
                        k = (f"softmax_cols_sync<{T}, {T}, {LG}, 1, {COLS_SYNC_THREADS}, {r}, "
                             f"{COLS_SYNC_MINB[r]}, false>")
                        found[("softmax.cu", k)] = None
                        if ti in COLS_NARROW_SYNC8_DTYPES:  # 8-byte packs (_fold_over_rounds)
                            r = COLS_NARROW_SYNC8_NR
                            k = (f"softmax_cols_sync<{T}, {T}, {LG}, {COLS_NARROW_PACK_BYTES // isz}, "
                                 f"{COLS_SYNC_THREADS}, {r}, {COLS_SYNC_MINB[r]}, false>")
                            found[("softmax.cu", k)] = None
                        for I in (1001, 1002, 1500):  # the folded split stream (_plan_cols_split_fold)
                            p = _plan_cols_split_fold(1, 10 ** 5, I, ti, to, log, dev)
                            for kname in (p.kernels() if p is not None else ()):
                                found[("softmax.cu", kname)] = None
                        p = _choose_cols_sync_skew(1, 8000, 1001, ti, to, log, dev)  # skewed sync packs
                        for kname in (p.kernels() if p is not None else ()):
                            found[("softmax.cu", kname)] = None
                        p = _plan_cols_wide(1, 16000, 1500, ti, to, log, dev, True)  # whole-width stream
                        for kname in (p.kernels() if p is not None else ()):
                            found[("softmax.cu", kname)] = None
                        if ti in COLS_SLAB_DTYPES:  # the whole-slab kernel (_choose_cols_slab)
                            found[("softmax.cu", f"softmax_cols_slab<{CTYPE[ti]}, {'true' if log else 'false'}>")] = None
                        for v, r in itertools.product((1, 2, 4) if isz == 2 else (), (4, 8, 16)):  # COLS_CL16_LANES
                            if r == 16 and v > COLS_CL16_LANES_NR16_MAX_PACK:
                                continue
                            p = _plan_cols_cl(1, 256 * r, COLS_CL16_LANES_TX * v, ti, to, log, dev, v, nr=r, v=v,
                                              segment=COLS_CL16_LANES_TX * v * isz, clusters=(16,))
                            for kname in (p.kernels() if p is not None else ()):
                                found[("softmax.cu", kname)] = None
                        for L, I in itertools.product(COLS_CL16_PROBE_L, COLS_CL16_PROBE_I):  # clusters of 16
                            for v in (8, 4, 2):
                                p = _choose_cols_cl16(1, L, I, ti, to, log, dev, v) if I % v == 0 else None
                                for kname in (p.kernels() if p is not None else ()):
                                    found[("softmax.cu", kname)] = None
                    if vec and (ti, to) in COLS_STAGED_PAIRS:  # every staged variant
                        isz = numpy.dtype(_np_name(ti)).itemsize
                        vmax = VECTOR_BYTES // max(isz, numpy.dtype(_np_name(to)).itemsize)
                        th = COLS_STAGE_THREADS_F64 if compute_itemsize(ti, to) == 8 else COLS_STAGE_THREADS
                        LG = "true" if log else "false"
                        for v in sorted({1, vmax}):
                            for c in ((1, 2, 4, 8) if dev.has_clusters else (1,)):
                                for st in ((0, 2) if (c == 1 and v * isz == VECTOR_BYTES) else (0,)):
                                    k = f"softmax_cols_staged<{CTYPE[ti]}, {CTYPE[to]}, {LG}, {v}, {th}, {st}, {c}>"
                                    found[("softmax.cu", k)] = None
    return list(found)


# ---- backward ----
# Plans for softmax_backward / log_softmax_backward (kernels/softmax_backward.cu).
# The regimes and thresholds are the forward's (warp / block / cluster / split /
# stream; cols); what changes is the register budget: a thread keeps y AND dy
# in their storage types, so the elements per thread come from a byte budget
# over both arrays instead of REG_ELEMS.

#: Elements of a row one backward thread keeps in registers, float / double
#: compute: half the forward's REG_ELEMS, since every element needs two
#: values (y and dy) in the compute type: the same registers as the forward.
BWD_REG_ELEMS = {c: n // 2 for c, n in REG_ELEMS.items()}
#: Block regime: target packs (of y and of dy) per thread; 0 = as many as
#: the register budget allows (fewest threads per row). H100, L2 flushed,
#: 4096 x 4096: fp32 2.67 TB/s at 1 (1024 threads) vs 2.61 at 2, 2.23 at 4;
#: bf16 2.25 vs 2.12 / 2.10 TB/s.
BWD_PACKS_PER_THREAD = 1
#: Warp regime of the backward, 32-bit and 16-bit rows (>= 4-element packs):
#: below BWD_WARP_LONG_MIN_ROWS rows (float32 log-softmax: at any row count)
#: a lane holds at most BWD_WARP_NP_FEW packs of y and of dy; longer rows
#: take the block kernel (one pack a thread). H100, tools/tune_sync_bwd.py
#: --what bwd (kernels/tune_bwd_rows*.txt), 512 columns, 1 / 8 / 64 / 512 /
#: 4096 / 32768 rows: log-softmax float32 block 5.18 / 5.15 / 5.57 / 6.42 /
#: 14.53 / 74.06 us vs warp (4 packs a lane) 6.77 / 7.20 / 6.99 / 8.38 /
#: 14.50 / 76.13; bfloat16 5.49 / 5.41 / 5.36 / 6.27 / 10.06 vs 5.89 / 5.92 /
#: 6.53 / 6.90 / 10.26 (2 packs a lane), but 48.9 vs 43.7 at 32768 rows;
#: softmax float32 512 rows 6.24 vs 7.17 us, warp ahead from 4096 rows.
BWD_WARP_NP_FEW = 1
BWD_WARP_LONG_MIN_ROWS = 4096
#: Largest block of the backward cols kernel: y and dy held for CAP
#: elements need more than the 64 registers a 1024-thread block allows.
BWD_COLS_MAX_THREADS = 512
#: Backward smem kernel (rows staged by cp.async, STAGES - 1 in flight):
#: rows of at least BWD_SMEM_MIN_PACKS packs when there are at least
#: BWD_SMEM_MIN_ROWS_PER_SM rows per SM, THREADS a block, up to
#: BWD_SMEM_BYTES of stages a block and BWD_SMEM_MAX_BLOCKS_PER_SM blocks.
#: H100 (tools/tune_sync_bwd.py), 4096 rows: fp32 8192 columns 148 vs 181 us
#: (softmax), log-softmax bf16 50257 columns 541 vs 816 us; below 2048
#: packs, and for 16-bit softmax rows (both arrays staged), the register
#: regimes are as fast or faster. A block that is alone on its SM takes
#: BWD_SMEM_THREADS_ALONE threads.
BWD_SMEM_MIN_PACKS = 2048
BWD_SMEM_MIN_ROWS_PER_SM = 2
BWD_SMEM_THREADS = 512
BWD_SMEM_THREADS_ALONE = 1024
BWD_SMEM_STAGES = 2
BWD_SMEM_BYTES = 224 * 1024
BWD_SMEM_MAX_BLOCKS_PER_SM = 2
#: Log-softmax in the smem kernel: one stage, one row per block (grid = rows),
#: as many blocks an SM as shared memory allows (SMEM1_SHAPES, by the bytes of
#: dy's row); rows up to the staging budget (BWD_SMEM_BYTES). H100
#: (tools/tune_bwd_occ.py, kernels/tune_bwd_occ*.txt; torch in brackets),
#: against the two-stage persistent form with 4 packs of y preloaded: bfloat16
#: 512 x 16384 25.8 vs 27.9 us (23.4), 4096 x 16384 142.1 vs 144.7 (138.6),
#: 4096 x 32768 272.9 vs 281.8 (355.8); float32 4096 x 8192 139.0 vs 143.6
#: (139.1), 4096 x 16384 271.4 vs 280.8 (322.1); against the register cluster
#: kernel 512 x 32768 77.5 vs 100.7 (98.4), 4096 x 32768 536.1 vs 686.3
#: (724.6); against the cluster stream 4096 x 50257 861 vs 1118 (1161). 16-bit
#: dy rows from BWD_SMEM1_MANY[0] packs are staged when there are
#: BWD_SMEM1_MANY[1] rows or more: bfloat16 4096 x 8192 75.2 vs 80.7 us in
#: registers (73.3); 512 rows stay in registers (15.0 vs 16.1).
BWD_SMEM1_MANY = (1024, 4096)
#: Float32 log-softmax rows of BWD_LOG32_BLOCK_PACKS packs (lo, hi] in the
#: block regime, from BWD_LOG32_BLOCK_ROWS rows: 512 threads of 2 packs at
#: full occupancy (launch bounds for 4 blocks an SM) instead of 1024 threads
#: of one. H100 (kernels/tune_bwd_occ.txt, backward bench at 45a0964), 4096
#: columns: 4096 rows 72.4 vs 75.1 us (torch 72.6); 512 rows 14.8 either way,
#: 1-64 rows slower (1 x 4096 6.6 vs 5.7); 16-bit rows gain nothing.
BWD_LOG32_BLOCK_PACKS = (512, 1024)
BWD_LOG32_BLOCK_ROWS = 4096
#: Cluster-streamed backward (softmax_backward_cstream: the stream's two
#: passes by a cluster of BWD_CSTREAM_CLUSTER blocks of BWD_CSTREAM_THREADS
#: per row, each block over a slice, so the second pass re-reads less from
#: DRAM) for many float32 rows of at least BWD_CSTREAM_MIN_PACKS[log] packs.
#: H100 (tools/tune_cstream.py, kernels/tune_cstream.txt): softmax 4096 x
#: 131072 3483 vs 3604 us (cluster), 4096 x 262144 7188 vs 7526 (stream), 512
#: x 262144 918 vs 950; log-softmax 4096 x 65536 1383 vs 1425, 131072 2848 vs
#: 3143, 262144 5799 vs 6114, 512 x 65536 186 vs 197; softmax 4096 x 65536
#: stays with the cluster kernel (1548 vs 1624). 16-bit rows gain nothing.
#: Log-softmax from 12288 packs (49152 columns): 4096 x 50257 1125 vs 1301
#: (cluster; torch 1160, kernels/tune_su.txt); at 4096 x 32768 the cluster,
#: stream and cstream kernels tie (688 / 680 / 683).
BWD_CSTREAM_MIN_PACKS = {False: 32768, True: 12288}
BWD_CSTREAM_CLUSTER = 8
BWD_CSTREAM_THREADS = 512
#: Backward source file.
BWD_SOURCE = "softmax_backward.cu"


def _isz(d: str) -> int:
    return numpy.dtype(_np_name(d)).itemsize


def bwd_f32_pair(y_dtype: str, dy_dtype: str, pack: int) -> bool:
    """float32 y and dy in 4-element packs (the rule of the cluster stream and
    of the float32 log-softmax block shape, as measured)."""
    return pack == 4 and _isz(y_dtype) == 4 and _isz(dy_dtype) == 4


def bwd_compute_dtype(y_dtype: str, dy_dtype: str, out_dtype: str) -> str:
    """float64 if any of the three is float64, else float32."""
    return "float64" if "float64" in (y_dtype, dy_dtype, out_dtype) else "float32"


def bwd_pack_width(y_dtype: str, dy_dtype: str, out_dtype: str) -> int:
    """Elements per vector access: 16 bytes of the widest of the three arrays."""
    return VECTOR_BYTES // max(_isz(y_dtype), _isz(dy_dtype), _isz(out_dtype))


def bwd_reg_elems(y_dtype: str, dy_dtype: str, out_dtype: str) -> int:
    """Elements of a row one backward thread keeps in registers."""
    return BWD_REG_ELEMS[8 if bwd_compute_dtype(y_dtype, dy_dtype, out_dtype) == "float64" else 4]


def bwd_cols_cap(y_dtype: str, dy_dtype: str, out_dtype: str) -> int:
    """Elements per thread the cols kernel keeps in registers."""
    return bwd_reg_elems(y_dtype, dy_dtype, out_dtype)


def backward_row_thresholds(y_dtype: str, dy_dtype: str, out_dtype: str, dev: DeviceInfo,
                            aligned: bool = True, log: bool = False) -> dict:
    """Largest row length (elements) of each on-chip backward regime, and the
    row count below which long rows are split (for tests/docs). ``warp``
    holds below BWD_WARP_LONG_MIN_ROWS rows (and for float32 log-softmax at
    any row count); ``warp_many`` (where it differs) from there on. Where the
    staged kernel applies, ``smem`` is its (shortest, longest) row and
    ``smem_rows`` the fewest rows it takes; between them it replaces the
    register regimes (16-bit log-softmax: from ``smem_many`` when there are
    ``smem_many_rows`` rows). ``cstream`` (float32 y and dy, clusters) is the
    shortest row that takes the cluster stream when rows are not few."""
    pack = bwd_pack_width(y_dtype, dy_dtype, out_dtype) if aligned else 1
    np_max = bwd_reg_elems(y_dtype, dy_dtype, out_dtype) // pack
    warp_np = min(np_max, BWD_WARP_NP_FEW) if pack >= 4 else np_max
    out = {
        "warp": 32 * warp_np * pack,  # below BWD_WARP_LONG_MIN_ROWS rows; float32 log-softmax: always
        "block": MAX_BLOCK_THREADS * np_max * pack,
    }
    if warp_np < np_max and not (log and pack == 4):  # from BWD_WARP_LONG_MIN_ROWS rows on
        out["warp_many"] = 32 * np_max * pack
    if dev.has_clusters:
        out["cluster"] = MAX_CLUSTER * MAX_BLOCK_THREADS * np_max * pack
        if bwd_f32_pair(y_dtype, dy_dtype, pack):
            # from this length on, rows >= few_rows take the cluster stream
            out["cstream"] = (BWD_CSTREAM_MIN_PACKS[log] - 1) * pack + 1
    out["few_rows"] = FEW_ROWS_PER_SM * dev.sm_count
    if (pack > 1 and _isz(dy_dtype) * pack == VECTOR_BYTES
            and (log or (_isz(y_dtype) * pack == VECTOR_BYTES and pack < 8))):
        budget = min(BWD_SMEM_BYTES, dev.max_smem)
        # log-softmax: one stage of dy (+1 KiB a block); softmax:
        # BWD_SMEM_STAGES of y and dy
        hi = ((budget - 1024) // VECTOR_BYTES if log
              else budget // (BWD_SMEM_STAGES * VECTOR_BYTES * 2))
        if hi >= BWD_SMEM_MIN_PACKS:
            out["smem"] = (BWD_SMEM_MIN_PACKS * pack, hi * pack)
            out["smem_rows"] = BWD_SMEM_MIN_ROWS_PER_SM * dev.sm_count
            if log and pack >= 8:  # 16-bit rows: staged from shorter rows when rows are many
                out["smem_many"] = BWD_SMEM1_MANY[0] * pack
                out["smem_many_rows"] = max(BWD_SMEM1_MANY[1], out["smem_rows"])
    return out


def plan_backward_rows(rows: int, L: int, y_dtype: str, dy_dtype: str, out_dtype: str, log: bool,
                       dev: DeviceInfo, vector_ok: bool = True, mis_possible: bool = False) -> LaunchPlan:
    """Backward plan for ``rows`` rows of ``L`` contiguous elements.

    ``vector_ok``: y, dy and dx rows share their misalignment modulo the pack
    width (else every access is scalar). ``mis_possible``: some row does not
    start on a vector boundary (costs one pack of capacity).
    Kernel arguments: (y, dy, dx, rows, L, sy, sd, sx) [+ ws, pps for split].
    """
    TY, TD, U = CTYPE[y_dtype], CTYPE[dy_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    pack = bwd_pack_width(y_dtype, dy_dtype, out_dtype) if vector_ok else 1
    np_max = bwd_reg_elems(y_dtype, dy_dtype, out_dtype) // pack
    packs = _cdiv(L + (pack - 1 if (mis_possible and pack > 1) else 0), pack)
    src = BWD_SOURCE
    sms = dev.sm_count
    head = f"{TY}, {TD}, {U}, {LG}, {pack}"

    # warp: LANES lanes per row, NP packs of y and dy per lane
    warp_np = np_max
    if pack >= 4 and (rows < BWD_WARP_LONG_MIN_ROWS or (log and pack == 4)):
        warp_np = min(np_max, BWD_WARP_NP_FEW)
    if packs <= 32 * warp_np:
        lanes = min(32, _next_pow2(packs))
        np_ = _ladder(_cdiv(packs, lanes))
        rows_per_block = WARP_KERNEL_THREADS // 32 * (32 // lanes)
        grid = min(_cdiv(rows, rows_per_block), sms * MAX_BLOCKS_PER_SM)
        k = f"softmax_backward_warp<{head}, {np_}, {lanes}>"
        return LaunchPlan("warp", src, k, (grid,), (WARP_KERNEL_THREADS,), pack)

    # many rows of a few tens of KB: staged in shared memory, pipelined
    sm = _plan_backward_smem(rows, packs, pack, y_dtype, dy_dtype, log, head, dev)
    if sm is not None:
        return sm

    # block: one block per row, row in registers
    if packs <= MAX_BLOCK_THREADS * np_max:
        ppt = min(np_max, BWD_PACKS_PER_THREAD or np_max)
        lo, hi = BWD_LOG32_BLOCK_PACKS
        log32 = (log and bwd_f32_pair(y_dtype, dy_dtype, pack) and lo < packs <= hi
                 and rows >= BWD_LOG32_BLOCK_ROWS)
        if log32:
            ppt = 2
        threads = min(MAX_BLOCK_THREADS, max(MIN_BLOCK_THREADS, _next_pow2(_cdiv(packs, ppt))))
        np_ = _ladder(_cdiv(packs, threads))
        minb = 2048 // threads if log32 else 1
        k = f"softmax_backward_block<{head}, {np_}, {threads}, {minb}>"
        return LaunchPlan("block", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (threads,), pack)

    few = rows < FEW_ROWS_PER_SM * sms

    # cluster stream (sm_90+): many long float32 rows, a cluster per row
    if (dev.has_clusters and not few and bwd_f32_pair(y_dtype, dy_dtype, pack)
            and packs >= BWD_CSTREAM_MIN_PACKS[log]):
        cl = BWD_CSTREAM_CLUSTER
        k = f"softmax_backward_cstream<{head}, {STREAM_UNROLL}, {BWD_CSTREAM_THREADS}, {cl}>"
        nclusters = min(rows, max(1, (sms * MAX_BLOCKS_PER_SM) // cl))
        return LaunchPlan("cstream", src, k, (nclusters * cl,), (BWD_CSTREAM_THREADS,), pack,
                          extra=(_cdiv(packs, cl),), cluster=cl)

    # cluster (sm_90+): a row over the registers of up to MAX_CLUSTER blocks
    # (except many rows of 16-bit log-softmax, which stream faster: its sum
    # re-reads dy alone, from L2. H100, 512-2048 rows of 65536-131072 bf16:
    # 102-418 us vs 124-505 us, tools/tune_sync_bwd.py)
    stream_16bit_log = log and pack >= 8 and not few
    if dev.has_clusters and packs <= MAX_CLUSTER * MAX_BLOCK_THREADS * np_max and not stream_16bit_log:
        threads = CLUSTER_THREADS
        if packs > MAX_CLUSTER * threads * np_max:
            threads = MAX_BLOCK_THREADS
        cluster = next(c for c in (2, 4, 8) if packs <= c * threads * np_max)
        np_ = _ladder(_cdiv(packs, cluster * threads))
        k = f"softmax_backward_cluster<{head}, {np_}, {threads}, {cluster}>"
        nclusters = min(rows, max(1, (sms * MAX_BLOCKS_PER_SM) // cluster))
        return LaunchPlan("cluster", src, k, (nclusters * cluster,), (threads,), pack,
                          cluster=cluster)

    # split: few long rows, each over `splits` blocks; sums via a workspace
    if few:
        cap = max(1, _cdiv(packs, SPLIT_MIN_PACKS))
        splits = max(1, min(cap, _cdiv(SPLIT_BLOCKS_PER_SM * sms, rows)))
        pps = _cdiv(packs, splits)
        splits = _cdiv(packs, pps)
        cdt = bwd_compute_dtype(y_dtype, dy_dtype, out_dtype)
        pre = (f"softmax_backward_split_partial<{TY}, {TD}, {CTYPE[cdt]}, {LG}, {pack}, "
               f"{STREAM_UNROLL}, {SPLIT_THREADS}>")
        k = f"softmax_backward_split_finish<{head}, {STREAM_UNROLL}, {SPLIT_THREADS}>"
        return LaunchPlan("split", src, k, (splits, rows), (SPLIT_THREADS,), pack,
                          pre_kernel=pre, pre_grid=(splits, rows), ws_elems=rows * splits,
                          ws_dtype=cdt, extra=(pps,))

    # stream: sum pass, then write pass; one block per row
    k = f"softmax_backward_stream<{head}, {STREAM_UNROLL}, {STREAM_THREADS}, {'true' if BWD_STREAM_REVERSE else 'false'}>"
    return LaunchPlan("stream", src, k, (min(rows, sms * MAX_BLOCKS_PER_SM),), (STREAM_THREADS,), pack)


def _plan_backward_smem(rows, packs, pack, y_dtype, dy_dtype, log, head, dev) -> Optional[LaunchPlan]:
    """softmax_backward_smem when rows are many, long enough and fit, and the
    staged arrays (dy; y too for softmax) move in 16-byte packs; else None."""
    many16 = log and pack >= 8 and packs >= BWD_SMEM1_MANY[0] and rows >= BWD_SMEM1_MANY[1]
    if (pack == 1 or (packs < BWD_SMEM_MIN_PACKS and not many16)
            or rows < BWD_SMEM_MIN_ROWS_PER_SM * dev.sm_count
            or _isz(dy_dtype) * pack != VECTOR_BYTES or (not log and _isz(y_dtype) * pack != VECTOR_BYTES)
            or (not log and pack >= 8)):
        return None
    budget = min(BWD_SMEM_BYTES, dev.max_smem)
    if log:  # one stage, one row a block, as many blocks as fit
        smem = packs * VECTOR_BYTES
        shape = smem1_shape(smem, dev)
        if shape is None or smem + 1024 > budget:
            return None
        threads, minb = shape
        k = f"softmax_backward_smem<{head}, {threads}, 1, {minb}>"
        return LaunchPlan("smem", BWD_SOURCE, k, (min(rows, dev.sm_count * MAX_BLOCKS_PER_SM),), (threads,), pack,
                          extra=(packs,), smem=smem)
    smem = BWD_SMEM_STAGES * packs * VECTOR_BYTES * 2
    if smem > budget:
        return None
    bps = max(1, min(BWD_SMEM_MAX_BLOCKS_PER_SM, budget // (smem + 1024)))
    threads = BWD_SMEM_THREADS_ALONE if bps == 1 else BWD_SMEM_THREADS
    k = f"softmax_backward_smem<{head}, {threads}, {BWD_SMEM_STAGES}, 1>"
    return LaunchPlan("smem", BWD_SOURCE, k, (min(rows, dev.sm_count * bps),), (threads,), pack,
                      extra=(packs,), smem=smem)


def plan_backward_cols(O: int, L: int, I: int, y_dtype: str, dy_dtype: str, out_dtype: str,
                       log: bool, dev: DeviceInfo) -> LaunchPlan:
    """Backward plan for the (O, L, I) layout, reduction along L, unit-stride I.
    Kernel arguments: (y, dy, dx, O, L, I, syo, syl, sdo, sdl, sxo, sxl, TX)."""
    TY, TD, U = CTYPE[y_dtype], CTYPE[dy_dtype], CTYPE[out_dtype]
    LG = "true" if log else "false"
    isz = min(_isz(y_dtype), _isz(dy_dtype))
    cap = bwd_cols_cap(y_dtype, dy_dtype, out_dtype)
    # lanes along I: a full 128-byte line when there is enough parallelism,
    # down to one 32-byte sector per row of the tile when tiles are few
    tx = min(32, _next_pow2(I))
    min_tx = min(tx, max(1, 32 // isz))
    while tx > min_tx and O * _cdiv(I, tx) < 2 * dev.sm_count:
        tx //= 2
    threads = COLS_THREADS
    while threads < BWD_COLS_MAX_THREADS and L > (threads // tx) * cap:
        threads *= 2
    tiles = O * _cdiv(I, tx)
    grid = min(tiles, dev.sm_count * MAX_BLOCKS_PER_SM)
    k = f"softmax_backward_cols<{TY}, {TD}, {U}, {LG}, {cap}, {threads}>"
    return LaunchPlan("cols", BWD_SOURCE, k, (grid,), (threads,), 1, extra=(tx,))


def backward_result_dtype(y_dtype: str, dy_dtype: str) -> str:
    """NumPy / ml_dtypes promotion of two supported float dtypes, as a table:
    equal -> itself; any float64 -> float64; any other mix (float16 with
    bfloat16, either with float32) -> float32."""
    if y_dtype == dy_dtype:
        return y_dtype
    if "float64" in (y_dtype, dy_dtype):
        return "float64"
    return "float32"


def all_backward_kernels(dev: DeviceInfo) -> list[tuple[str, str]]:
    """Every (source, name expression) the backward dispatcher can choose on
    ``dev`` (for the compile check): the dispatcher run over row lengths at
    and around every threshold, every (y, dy) dtype pair with its result
    dtype, both flags, aligned or not, few rows or many."""
    dts = ("float16", "bfloat16", "float32", "float64")
    found: dict[tuple[str, str], None] = {}
    for ty in dts:
        for td in dts:
            to = backward_result_dtype(ty, td)
            for log in (False, True):
                for vec in (True, False):
                    pack = bwd_pack_width(ty, td, to) if vec else 1
                    np_max = bwd_reg_elems(ty, td, to) // pack
                    Ls = set()
                    for lanes in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192):
                        for npk in range(1, np_max + 1):
                            base = lanes * npk * pack
                            Ls.update((max(1, base - 1), base, base + 1))
                    for c in (2, 4, 8):
                        for t in (CLUSTER_THREADS, MAX_BLOCK_THREADS):
                            for npk in range(1, np_max + 1):
                                base = c * t * npk * pack
                                Ls.update((base - 1, base, base + 1))
                    for npk in _PROBE_PACKS + tuple(BWD_CSTREAM_MIN_PACKS.values()):
                        Ls.update((npk * pack - 1, npk * pack, npk * pack + 1))
                    Ls.add(10 ** 7)
                    for L in sorted(Ls):
                        for rows in _probe_rows(dev):
                            for mis in (False, True):
                                p = plan_backward_rows(rows, L, ty, td, to, log, dev, vec, mis)
                                for kname in p.kernels():
                                    found[(p.source, kname)] = None
                LG = "true" if log else "false"
                cap = bwd_cols_cap(ty, td, to)
                threads = COLS_THREADS
                while threads <= BWD_COLS_MAX_THREADS:
                    k = (f"softmax_backward_cols<{CTYPE[ty]}, {CTYPE[td]}, {CTYPE[to]}, {LG}, "
                         f"{cap}, {threads}>")
                    found[(BWD_SOURCE, k)] = None
                    threads *= 2
    return list(found)


# ---- top-k ----
# Fused softmax + top-k (``cusoftmax.softmax_topk``, kernels/topk.cu).
#
# Problems arrive as R rows of L contiguous elements and k (1 <= k <= L);
# KP = next_pow2(k) is the length of the sorted candidate lists on chip.
#
# =========  ===================================================================
# block      one block per row, one read of x (the paper's Algorithm 4: online
#            (m, d) and top-k candidates in the same pass): the default
# csm        sm_90, float compute, KP <= TOPK_CSM_KP_MAX, few rows (rows x
#            cluster <= SMs): a cluster of 1-8 blocks per row holds the row in
#            shared memory (16-byte loads), so the selection after the one read
#            runs on chip, exchanging through distributed shared memory
#            (st.async counted on mbarriers) instead of a last-block election
#            (topk_csm). Rows up to TOPK_CSM_ALL_K_ROW_BYTES for every k (from
#            TOPK_CSM_MIN_ROW_BYTES); longer rows from k >= TOPK_CSM_LONG_MIN_K,
#            from TOPK_CSM_MID_MIN_K on TOPK_CSM_MID_ROWS .. SMs / 16 rows, or
#            from TOPK_CSM_MANY_ROWS rows (seg is faster otherwise). A block
#            holds TOPK_CSM_MIN_PACKS .. TOPK_CSM_MAX_BYTES of the row.
# seg        KP <= TOPK_SEG_KP_MAX and at least TOPK_SEG_MIN_SEGS_PER_K x k
#            segments, on few rows (< TOPK_SEG_ROWS_PER_SM x SMs) or, with
#            KP >= TOPK_SEG_MANY_MIN_KP and longer segments, on many: one
#            launch (topk_seg). Blocks stream segments of the
#            row keeping (m, d) and each segment's best candidate; the row's
#            last block ranks the segment maxima (small k: picks the k best,
#            topk_seg_pick), re-reads the k best segments (from L2) and
#            selects the top k among their elements that are not worse than
#            the k-th best maximum. One read of x from DRAM.
# seg, csm   read x evict-first in L2 (TOPK_EVICT_FIRST_MIN_BYTES ..
#            TOPK_EVICT_FIRST_MAX_BYTES arrays).
# split      few long rows (rows < TOPK_SPLIT_ROWS_PER_SM x SMs and
#            L >= 2 x TOPK_SPLIT_MIN_ELEMS): each row over `splits` blocks, each
#            writing its (m, d) and KP best candidates to a workspace;
#            topk_merge combines them. Still one read of x.
# safe       algorithm="safe": one block per row, the row max first, then d and
#            the top-k in a second read (the paper's "safe fused")
# unfused    algorithm="unfused": cusoftmax.softmax(algorithm="safe") to a
#            temporary, then the selection kernel (TOPK_SELECT, block or split
#            as above) and a gather of the values (the paper's "safe unfused")
# sort       k > TOPK_KP_MAX, or float-compute rows longer than
#            TOPK_MAX_PACKED_ROW (the index no longer fits the packed 64-bit
#            candidate): a stable cupy.argsort of the ranking keys and a gather
#            from cusoftmax.softmax. Correct for every size, not one read.
# =========  ===================================================================
#
# algorithm "auto" and "online" are the same: block / split, or sort above
# TOPK_KP_MAX.

TOPK_SOURCE = "topk.cu"
TOPK_ALGORITHMS = ("auto", "online", "safe", "unfused")
#: Largest k (and candidate list) kept on chip: larger k take the sort path.
TOPK_KP_MAX = 1024
#: Longest row the float-compute kernels index: a candidate packs the 32-bit
#: value key with the complement of a 32-bit index, which must stay non-zero.
TOPK_MAX_PACKED_ROW = 2 ** 32 - 2
#: Elements per thread per batch (loads in flight), by compute itemsize: 16
#: floats = four 16-byte packs of float32 / two of 16-bit types; doubles need
#: far more registers per element (software exp).
TOPK_BATCH_ELEMS = {4: 16, 8: 4}
#: Threads per block of the stream kernel (multiples of a warp).
TOPK_MAX_THREADS = 256
TOPK_MIN_THREADS = 32
#: A block gets about this many batches per lane of its slice before it grows.
TOPK_BATCHES_PER_LANE = 4
#: Lists of KP >= this are kept per block (one list, compacted by the whole
#: block: the block's k-th best filters, so far fewer candidates than with a
#: list per warp); shorter lists per warp (no block barriers while streaming).
#: Float-compute block lists run topk_radix (radix-select pruning), which on
#: random rows loses to warp lists / topk_seg below this KP (H100, 350c054:
#: 4096 x 131072 k = 64 1105 vs 921 us, 1 x 128256 k = 50 34.1 vs 13.3 us;
#: kernels/try_radix_small_k.txt).
TOPK_BLOCK_LIST_KP = 128
#: Incoming-candidate slots: per warp list TOPK_WARP_INC (>= KP: KP <= 64);
#: per block list of double compute max(TOPK_BLOCK_INC_MIN, 2 x KP) (float:
#: topk_radix_inc).
TOPK_WARP_INC = 64
TOPK_BLOCK_INC_MIN = 1024
#: topk_radix (block lists, float compute): buffer room beyond the pruned
#: list and one batch; a prune runs when less than a batch of room is left
#: (H100, 4096 x 131072 float32: k = 256 1.67-1.69 TB/s, k = 1024 1.18, against
#: 1.16 and 0.64 with topk_stream's bitonic folds; kernels/prof_topk_large.txt).
TOPK_RADIX_ROOM = 1024
#: Dynamic shared memory cap of the stream and merge kernels (bytes).
TOPK_SMEM_MAX = 96 * 1024
#: Rows below this many per SM are "few": long rows are then split.
TOPK_SPLIT_ROWS_PER_SM = 2
#: Target blocks per SM when splitting (H100: 2 beat 4 by 10-20% on
#: 64 x 131072, k = 5 / 50; no difference on 1 x 128256).
TOPK_SPLIT_BLOCKS_PER_SM = 2
#: Each split block reads at least this many elements.
TOPK_SPLIT_MIN_ELEMS = 4096
#: Threads of the merge kernel and of the gather / sort-key kernels.
TOPK_MERGE_THREADS = 256
TOPK_AUX_THREADS = 256
#: Grid limits: rows are strided over at most this many blocks (grid y).
TOPK_MAX_GRID_Y = 65535
#: Grid-stride helper kernels launch at most this many blocks per SM.
TOPK_AUX_BLOCKS_PER_SM = 32

#: The one-launch few-rows regime (kernels/topk.cu, topk_seg): candidate
#: lists up to this KP, at most TOPK_SEG_WMAX segments a row (a multiple of
#: 32 packs each), TOPK_SEG_THREADS threads a block and one segment a warp at
#: a time, at most TOPK_SEG_BLOCKS_PER_SM x SMs blocks in all; at least
#: TOPK_SEG_MIN_SEGS_PER_K x k segments (else the split regime).
TOPK_SEG_KP_MAX = 64
TOPK_SEG_WMAX = 256
#: Segment capacity of the kernel (its TOPK_SEG_WMAX): the workspace row stride.
TOPK_SEG_WCAP = 256
TOPK_SEG_THREADS = 256
TOPK_SEG_BLOCKS_PER_SM = 8
#: Up to TOPK_SEG_FILL_ROWS rows the grid is also held to the blocks that are
#: resident at once (TOPK_SEG_RESIDENT_PER_SM: 62 registers at 256 threads),
#: so it runs in one wave (H100, tools/seg_grid.py, kernels/seg_grid.txt:
#: 64 x 262144 float32 k = 1 43.9 -> 41.3 us, 64 x 128256 k = 1 26.5 -> 23.6,
#: k = 50 34.3 -> 32.5; 17 blocks a row had made 2.06 waves of 528).
TOPK_SEG_FILL_ROWS = 64
TOPK_SEG_RESIDENT_PER_SM = 4
#: From this many rows per SM on ("many" rows) seg needs KP >= TOPK_SEG_MANY_MIN_KP
#: and segments of at least TOPK_SEG_MANY_MIN_ELEMS elements (H100: 4096 x 131072
#: float32 k = 50 946 us against 1112 us in the block regime, bfloat16 761 against
#: 1230; but k = 5 907 against 775, k = 10 (KP 16) 2.36 against 2.70 TB/s, and
#: 128-element segments stream slowly: 512 x 32000 float32 k = 50 104 against 87;
#: tools/seg_try.py rows, bench topk). Segments there are whole batches (32 lanes x
#: the unroll) where that leaves enough of them: 4096 x 131072 k = 50 float32 850
#: against 945 us with 160-pack segments, bfloat16 670 against 761 (seg_try.py many).
TOPK_SEG_ROWS_PER_SM = 2
TOPK_SEG_MANY_MIN_KP = 32
TOPK_SEG_MANY_MIN_ELEMS = 256
TOPK_SEG_MIN_SEGS_PER_K = 2
#: Elements a lane loads at once in topk_seg, by compute itemsize.
TOPK_SEG_BATCH_ELEMS = {4: 16, 8: 4}
#: Halve topk_seg's unroll while a segment fills at most half a warp's batch
#: (32 lanes x unroll packs): short segments then stream without half-idle
#: lanes (H100, tools/seg_unroll_try.py, kernels/seg_unroll.txt). False: the
#: batch of TOPK_SEG_BATCH_ELEMS whatever the segment.
TOPK_SEG_FIT_UNROLL = True
#: ... and stream those segments as a software pipeline (topk_seg's PIPE: the
#: next batch loaded before the current one is reduced; the halved unroll
#: leaves room for the second batch's registers).
TOPK_SEG_PIPE = True
#: topk_seg and topk_csm read arrays of TOPK_EVICT_FIRST_MIN_BYTES ..
#: TOPK_EVICT_FIRST_MAX_BYTES evict-first in L2 (their EF flag; kernels/
#: common.cuh, load_pack_once): after a write that left the L2 dirty (the
#: benchmark's memset flush) the read then writes back only part of it. H100,
#: kernels/evict_first.txt run 3: 64 x 128256 float32 k = 1 24.3 -> 22.7 us,
#: k = 5 28.9 -> 27.1, 64 x 262144 k = 5 45.2 -> 42.5, bfloat16 64 x 128256 k = 5
#: (csm) 20.6 -> 19.8. Run 2 (no lower bound): arrays of 8 MB and less lost
#: 0.1-0.5 us (1 x 262144 k = 1 10.1 -> 10.6, 64 x 32768 k = 1 11.5 -> 11.8), and
#: 2 GiB ones gained nothing.
TOPK_EVICT_FIRST_MIN_BYTES = 12 << 20
TOPK_EVICT_FIRST_MAX_BYTES = 256 << 20
#: From this k on, topk_seg keeps two candidates a segment (its TWO flag: the
#: best and the best in another lane, `second` bounding the rest), so the
#: last block re-reads a selected segment only where three of its elements
#: (or two in one lane) are not worse than tau. H200 (nvidia-h200/kernels/
#: seg_two.txt, tools/ab_seg.py, tools/seg_rereads.py): re-read segments a row
#: 5.4 -> 0.75 on 64 x 128256 float32 k = 50, 5.9 -> 0.73 on 64 x 262144;
#: 64 x 262144 k = 50 50.5 -> 44.9 us, 64 x 128256 k = 50 30.4 -> 29.3, k = 33
#: 28.7 -> 27.7, 263 x 65536 k = 50 54.9 -> 52.1. Below k = 33 too few rows
#: re-read (k = 16: 0.64 segments a row) to pay for it: a first form with it
#: on at every k took 64 x 128256 k = 5 from 25.8 to 27.4 us (this rule: 25.3).
#: The TWO kernels also rank the segment maxima by counting instead of chunk
#: sorts and binary searches (nvidia-h200/kernels/seg_count.txt: 64 x 128256
#: k = 50 -0.6 us, 4096 x 32000 k = 50 -14 us; slower without TWO at k < 33),
#: which moved the rule down from 33 (seg_count.txt runs 4-5, the same launch
#: with and without TWO): from k = 24 every shape tried is faster or within
#: 0.3 us (64 x 128256 k = 24 -0.1 .. -0.3 us, 64 x 262144 -1.7, 16 x 131072
#: +0.05 / +0.3), at k = 17-20 64 x 128256 is 0.2-0.9 us slower, 16 x 131072 k = 17
#: 0.6; many-row plans (TOPK_SEG_ROWS_PER_SM x SMs rows and more, seg from k
#: = 17) gain at every k tried (1024 x 32768 k = 17 75.1 -> 68.8 us, k = 24
#: 79.5 -> 70.3; 512 x 50257 k = 17 58.1 -> 55.7), hence their own bound.
TOPK_SEG_TWO_MIN_K = 24
TOPK_SEG_TWO_MANY_MIN_K = 17
#: From k = 2 up to this k (TOPK_SEG_PICK_ONE_ROW_MAX_K for a single row),
#: topk_seg's last block picks the k best segment maxima by warp argmaxes
#: (its PICK flag: each warp its chunk of 32 maxima's k best, then one warp
#: the row's k best of those, one argmax a rank) instead of sorting every
#: chunk and ranking each maximum by binary searches in the others. Its cost
#: grows with k (two argmax rounds a rank), the sort and searches' does not.
#: H200 (nvidia-h200/kernels/seg_pick.txt run 5, tools/ab_seg_pick.py: the
#: same launch with and without the flag): 64 x 128256 float32 k = 2 25.3 ->
#: 20.9 us, k = 5 25.1 -> 22.5, k = 8 25.8 -> 23.6; 64 x 262144 k = 5 40.3 ->
#: 37.2; 263 x 65536 k = 8 47.5 -> 45.0; 16 x 131072 k = 8 17.4 -> 16.2. One
#: row gains less and loses from k = 6 on (1 x 128256 k = 5 10.5 -> 9.9, k = 6
#: 10.0 -> 10.6, k = 8 9.9 -> 11.1), hence its smaller limit.
TOPK_SEG_PICK_MAX_K = 8
TOPK_SEG_PICK_ONE_ROW_MAX_K = 5

#: The row-on-chip few-rows regime (kernels/topk.cu, topk_csm): candidate
#: lists up to this KP, TOPK_CSM_THREADS a block, clusters of these sizes
#: (the largest with rows x size <= SMs and a block's share of the row within
#: TOPK_CSM_MIN_PACKS 16-byte packs (every lane group gets elements) and
#: TOPK_CSM_MAX_BYTES of shared memory). H100, tools/csm_try.py time
#: (kernels/csm_try.txt), against the dispatcher without csm (seg): faster
#: for every k on rows of 64-256 KiB (1 / 8 / 64 / 128 x 32768 float32,
#: k = 50: 9.8 / 10.4 / 15.6 / 19.4 us against 14.0 / 15.7 / 22.5 / 29.4;
#: 1 / 8 x 65536 float32, k = 1 - 50: 7.6 - 11.4 against 8.0 - 16.5; the one
#: loss: 1 x 128256 bfloat16 at k = 5 / 17, 10.8 / 10.9 against 10.3 / 10.3);
#: on longer rows from k = TOPK_CSM_LONG_MIN_K (1 / 8 x 262144 float32,
#: k = 50: 15.2 / 16.7 against 18.9 / 22.3; k = 17: 14.4 / 16.5 against
#: 13.7 / 18.8), from k = TOPK_CSM_MID_MIN_K for TOPK_CSM_MID_ROWS rows and
#: more while clusters of 8 take at most half the SMs (8 x 262144 float32,
#: k = 5 - 17: 16.1 - 16.5 against 17.8 - 18.8; 8 x 128256: 12.9 - 13.0
#: against 12.9 - 14.0; at 16 rows seg is faster for k < 33), or from
#: TOPK_CSM_MANY_ROWS rows (64 x 128256 bfloat16: 17.0 - 22.7 against
#: 19.2 - 26.8 for k = 1 - 50).
TOPK_CSM_KP_MAX = 64
TOPK_CSM_THREADS = 512
TOPK_CSM_CLUSTERS = (8, 4, 2, 1)
TOPK_CSM_MIN_PACKS = 512
TOPK_CSM_MAX_BYTES = 200 * 1024
TOPK_CSM_MIN_ROW_BYTES = 64 * 1024
TOPK_CSM_ALL_K_ROW_BYTES = 256 * 1024
TOPK_CSM_LONG_MIN_K = 33
TOPK_CSM_MID_ROWS = 8
TOPK_CSM_MID_MIN_K = 5
TOPK_CSM_MANY_ROWS = 64

_TOPK_MODE = {"online": "TOPK_ONLINE", "safe": "TOPK_SAFE", "select": "TOPK_SELECT"}
#: Run-time output-type codes of kernels/topk.cu (TOPK_OUT_*).
TOPK_OUT_CODE = {"float16": 0, "bfloat16": 1, "float32": 2, "float64": 3}


@dataclass(frozen=True)
class TopKPlan:
    """Launches of one top-k problem (see the regime table above).

    ``kernel``/``grid``/``block``/``smem``: the stream kernel (regimes block,
    split, safe, unfused) or the sort-key kernel (sort); ``block_lists``: one
    candidate list per block instead of one per warp. ``merge_*``: the
    second launch of a split. ``gather_kernel``: values from a softmax
    temporary (unfused, sort). ``cand_bytes`` x ``kp`` x ``splits`` x rows is
    the candidate workspace of a split, plus 2 x ``splits`` x rows values of
    ``compute_dtype`` for the (m, d) partials.
    """
    regime: str
    kernel: str
    grid: tuple
    block: tuple
    smem: int = 0
    kp: int = 0
    inc: int = 0
    block_lists: bool = False
    splits: int = 1
    pps: int = 0
    seg_packs: int = 0  # seg: packs per segment
    seg_per_block: int = 0  # seg: segments per block
    compute_dtype: str = "float32"
    cand_bytes: int = 8
    merge_kernel: Optional[str] = None
    merge_grid: Optional[tuple] = None
    merge_block: Optional[tuple] = None
    merge_smem: int = 0
    gather_kernel: Optional[str] = None
    softmax_algorithm: Optional[str] = None  # the temporary's (unfused, sort)
    key_dtype: Optional[str] = None  # sort path: dtype of the ranking keys
    source: str = TOPK_SOURCE

    def kernels(self):
        """Name expressions this plan launches in kernels/topk.cu."""
        return [k for k in (self.kernel, self.merge_kernel, self.gather_kernel) if k]


def topk_compute_dtype(in_dtype: str, out_dtype: str, algorithm: str = "auto") -> str:
    """Arithmetic (and ranking) type: float64 when either side is float64;
    the unfused path only ranks, in the input's compute type."""
    if algorithm == "unfused":
        return "float64" if in_dtype == "float64" else "float32"
    return "float64" if compute_itemsize(in_dtype, out_dtype) == 8 else "float32"


def topk_kp(k: int) -> int:
    """Length of the on-chip candidate lists for k."""
    return _next_pow2(k)


def topk_block_lists(kp: int) -> bool:
    """One candidate list per block (else per warp) for lists of kp."""
    return kp >= TOPK_BLOCK_LIST_KP


def topk_inc(kp: int) -> int:
    """Incoming-candidate slots of a list of kp."""
    return max(TOPK_BLOCK_INC_MIN, 2 * kp) if topk_block_lists(kp) else max(TOPK_WARP_INC, kp)


def topk_radix_inc(batch: int) -> int:
    """Buffer slots of topk_radix beyond its list of KP, whose block appends
    a whole batch of ``batch`` elements (threads x elements a thread) at a
    time: a batch plus TOPK_RADIX_ROOM, so a pruned buffer (<= KP) takes any
    batch."""
    return batch + TOPK_RADIX_ROOM


def topk_thresholds(dev: DeviceInfo) -> dict:
    """Boundaries of the top-k regimes, for tests and docs: k above ``kp_max``
    sorts; rows below ``seg_rows`` with next_pow2(k) <= ``seg_kp_max`` and
    at least ``seg_min_segs_per_k`` x k segments (``topk_seg_packs``) take
    seg; else rows below ``split_rows`` with L >= ``split_cols`` split."""
    return {"kp_max": TOPK_KP_MAX, "split_rows": TOPK_SPLIT_ROWS_PER_SM * dev.sm_count,
            "split_cols": 2 * TOPK_SPLIT_MIN_ELEMS, "max_packed_row": TOPK_MAX_PACKED_ROW,
            "seg_rows": TOPK_SEG_ROWS_PER_SM * dev.sm_count, "seg_kp_max": TOPK_SEG_KP_MAX,
            "seg_min_segs_per_k": TOPK_SEG_MIN_SEGS_PER_K}


def topk_seg_packs(L: int, in_dtype: str, min_packs: int = 32, multiple: int = 32) -> tuple:
    """(packs per segment, segments) of a row of L in the seg regime (the
    worst row misalignment counted): segments of at least ``min_packs``, a
    multiple of ``multiple`` (itself a multiple of 32) packs."""
    pack = VECTOR_BYTES // numpy.dtype(_np_name(in_dtype)).itemsize
    packs = _cdiv(L + pack - 1, pack)
    sp = max(min_packs, multiple * _cdiv(packs, multiple * TOPK_SEG_WMAX))
    sp = _cdiv(sp, multiple) * multiple
    return sp, _cdiv(packs, sp)


def topk_csm_shape(rows: int, L: int, k: int, in_dtype: str, dev: DeviceInfo) -> Optional[tuple]:
    """(cluster size, packs a block) of the csm regime for ``rows`` rows of
    ``L`` (float compute, online), or None where it does not apply."""
    if dev.cc < 90 or _next_pow2(k) > TOPK_CSM_KP_MAX:
        return None
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    if L * isz < TOPK_CSM_MIN_ROW_BYTES:
        return None
    if L * isz > TOPK_CSM_ALL_K_ROW_BYTES and rows < TOPK_CSM_MANY_ROWS and k < TOPK_CSM_LONG_MIN_K and not (
            k >= TOPK_CSM_MID_MIN_K and TOPK_CSM_MID_ROWS <= rows and rows * 16 <= dev.sm_count):
        return None
    packs = _cdiv(L + VECTOR_BYTES // isz - 1, VECTOR_BYTES // isz)  # the worst misalignment adds a pack
    for cs in TOPK_CSM_CLUSTERS:
        ppb = _cdiv(packs, cs)
        if rows * cs <= dev.sm_count and TOPK_CSM_MIN_PACKS <= ppb and ppb * VECTOR_BYTES <= TOPK_CSM_MAX_BYTES:
            return cs, ppb
    return None


def topk_evict_first(rows: int, L: int, in_dtype: str) -> bool:
    """Whether seg / csm read ``rows`` x ``L`` evict-first (their EF flag)."""
    n = rows * L * numpy.dtype(_np_name(in_dtype)).itemsize
    return TOPK_EVICT_FIRST_MIN_BYTES <= n <= TOPK_EVICT_FIRST_MAX_BYTES


def topk_seg_two(k: int, many: bool) -> bool:
    """Whether topk_seg keeps two candidates a segment and ranks the maxima
    by counting (its TWO flag; see TOPK_SEG_TWO_MIN_K); ``many``: a many-row
    plan (rows >= TOPK_SEG_ROWS_PER_SM x SMs)."""
    return k >= (TOPK_SEG_TWO_MANY_MIN_K if many else TOPK_SEG_TWO_MIN_K)


def topk_seg_pick(rows: int, k: int) -> bool:
    """Whether topk_seg's last block picks the k best segment maxima (its
    PICK flag; see TOPK_SEG_PICK_MAX_K)."""
    return 2 <= k <= (TOPK_SEG_PICK_MAX_K if rows > 1 else TOPK_SEG_PICK_ONE_ROW_MAX_K)


def _topk_seg_name(head: str, pipe: bool, ef: bool, two: bool = False, pick: bool = False) -> str:
    """``topk_seg<head, PIPE, EF, TWO, PICK>`` with its trailing defaulted
    (false) flags left out."""
    flags = [pipe, ef, two, pick]
    while flags and not flags[-1]:
        flags.pop()
    return f"topk_seg<{', '.join([head] + [str(f).lower() for f in flags])}>"


def topk_seg_flags(name: str) -> tuple:
    """``(head, flags)`` of a topk_seg name, the inverse of _topk_seg_name:
    its first four template arguments and a dict of its PIPE / EF / TWO /
    PICK flags by lower-case name (a left-out flag is false)."""
    a = name[len("topk_seg<"):-1].split(", ")
    flags = {f: len(a) > 4 + i and a[4 + i] == "true" for i, f in enumerate(("pipe", "ef", "two", "pick"))}
    return ", ".join(a[:4]), flags


def topk_aux_grid(n: int, dev: DeviceInfo) -> tuple:
    """Grid of the grid-stride helper kernels (gather, sort keys) for n items."""
    return (max(1, min(_cdiv(n, TOPK_AUX_THREADS), TOPK_AUX_BLOCKS_PER_SM * dev.sm_count)),)


def plan_topk(rows: int, L: int, k: int, in_dtype: str, out_dtype: str, dev: DeviceInfo,
              algorithm: str = "auto") -> TopKPlan:
    """Plan for the top-k of ``rows`` rows of ``L`` contiguous elements
    (``1 <= k <= L``, ``rows >= 1``); ``out_dtype`` is the values' dtype."""
    T, U = CTYPE[in_dtype], CTYPE[out_dtype]
    cdt = topk_compute_dtype(in_dtype, out_dtype, algorithm)
    C, csz = CTYPE[cdt], numpy.dtype(cdt).itemsize
    sms = dev.sm_count
    gather = f"topk_gather<{U}>"

    # sort: k too large for on-chip lists, or a row too long to index (float)
    if k > TOPK_KP_MAX or (csz == 4 and L > TOPK_MAX_PACKED_ROW):
        return TopKPlan("sort", f"topk_sort_keys<{T}, {C}>", topk_aux_grid(rows * L, dev),
                        (TOPK_AUX_THREADS,), compute_dtype=cdt, gather_kernel=gather,
                        softmax_algorithm="auto", key_dtype="uint32" if csz == 4 else "uint64")

    mode = {"auto": "online", "online": "online", "safe": "safe", "unfused": "select"}[algorithm]
    isz = numpy.dtype(_np_name(in_dtype)).itemsize
    pack = VECTOR_BYTES // isz
    unroll = max(1, TOPK_BATCH_ELEMS[csz] // pack)
    kp, cb = topk_kp(k), (8 if csz == 4 else 16)
    inc, blists = topk_inc(kp), topk_block_lists(kp)
    packs = _cdiv(L + pack - 1, pack)  # the worst row misalignment adds a pack

    # csm: few rows held on chip by a cluster each
    if mode == "online" and csz == 4:
        shape = topk_csm_shape(rows, L, k, in_dtype, dev)
        if shape is not None:
            cs, ppb = shape
            ef = ", true" if topk_evict_first(rows, L, in_dtype) else ""
            return TopKPlan("csm", f"topk_csm<{T}, {cs}{ef}>", (cs, rows), (TOPK_CSM_THREADS,),
                            ppb * VECTOR_BYTES, kp, 0, False, 1, ppb, compute_dtype=cdt, cand_bytes=cb)

    few = mode != "safe" and rows < TOPK_SPLIT_ROWS_PER_SM * sms
    # seg: few long rows, short lists, in one launch; on more rows only for
    # longer lists and segments (shorter ones stream too slowly)
    many = rows >= TOPK_SEG_ROWS_PER_SM * sms
    if (mode != "safe" and kp <= TOPK_SEG_KP_MAX and rows <= TOPK_MAX_GRID_Y
            and (not many or kp >= TOPK_SEG_MANY_MIN_KP)):
        sunroll = max(1, TOPK_SEG_BATCH_ELEMS[csz] // pack)
        need = TOPK_SEG_MIN_SEGS_PER_K * k
        if many:  # whole batches when enough segments remain
            sp, nseg = topk_seg_packs(L, in_dtype, max(32, TOPK_SEG_MANY_MIN_ELEMS // pack), 32 * sunroll)
            if nseg < need:
                sp, nseg = topk_seg_packs(L, in_dtype, max(32, TOPK_SEG_MANY_MIN_ELEMS // pack))
        else:
            sp, nseg = topk_seg_packs(L, in_dtype)
        if nseg >= need:
            threads = TOPK_SEG_THREADS
            unroll = sunroll
            while TOPK_SEG_FIT_UNROLL and unroll > 1 and sp <= 16 * unroll:
                unroll //= 2
            pipe = TOPK_SEG_PIPE and unroll < sunroll
            # blocks per row: a segment per warp, but no more than
            # TOPK_SEG_BLOCKS_PER_SM x SMs blocks in all (warps then loop)
            nblk = max(1, min(_cdiv(nseg, threads // 32), _cdiv(TOPK_SEG_BLOCKS_PER_SM * sms, rows)))
            if rows <= TOPK_SEG_FILL_ROWS:  # ... and within one wave of resident blocks
                nblk = max(1, min(nblk, TOPK_SEG_RESIDENT_PER_SM * sms // rows))
            spb = _cdiv(nseg, nblk)
            grid = (_cdiv(nseg, spb), rows)
            extra = dict(gather_kernel=gather, softmax_algorithm="safe") if mode == "select" else {}
            return TopKPlan("seg" if mode == "online" else "unfused",
                            _topk_seg_name(f"{T}, {C}, {_TOPK_MODE[mode]}, {unroll}", pipe,
                                           topk_evict_first(rows, L, in_dtype), topk_seg_two(k, many),
                                           topk_seg_pick(rows, k)),
                            grid, (threads,),
                            0, kp, 0, False, grid[0], 0, sp, spb, cdt, cb, **extra)

    # split: few long rows over several blocks (not the paper's safe form)
    splits = 1
    if few:
        splits = min(_cdiv(TOPK_SPLIT_BLOCKS_PER_SM * sms, rows), L // TOPK_SPLIT_MIN_ELEMS,
                     TOPK_SMEM_MAX // (kp * cb))
        splits = max(1, splits)
    pps = _cdiv(packs, splits)
    splits = _cdiv(packs, pps)

    # block: enough lanes for TOPK_BATCHES_PER_LANE batches each, within smem
    threads = _next_pow2(_cdiv(pps, unroll * TOPK_BATCHES_PER_LANE))
    threads = min(TOPK_MAX_THREADS, max(TOPK_MIN_THREADS, threads))
    while not blists and threads > TOPK_MIN_THREADS and (threads // 32) * (kp + inc) * cb > TOPK_SMEM_MAX:
        threads //= 2
    kname = "topk_stream"
    if blists and csz == 4:  # block lists of float compute: topk_radix
        kname, inc = "topk_radix", topk_radix_inc(threads * unroll * pack)
    smem = (1 if blists else threads // 32) * (kp + inc) * cb
    kernel = f"{kname}<{T}, {C}, {_TOPK_MODE[mode]}, {unroll}>"
    grid = (splits, min(rows, TOPK_MAX_GRID_Y))
    regime = {"safe": "safe", "select": "unfused"}.get(mode, "split" if splits > 1 else "block")
    extra = {}
    if splits > 1:
        extra = dict(merge_kernel=f"topk_merge<{C}, {_TOPK_MODE[mode]}>",
                     merge_grid=(min(rows, TOPK_MAX_GRID_Y),), merge_block=(TOPK_MERGE_THREADS,),
                     merge_smem=splits * kp * cb)
    if mode == "select":
        extra.update(gather_kernel=gather, softmax_algorithm="safe")
    return TopKPlan(regime, kernel, grid, (threads,), smem, kp, inc, blists, splits, pps,
                    compute_dtype=cdt, cand_bytes=cb, **extra)


def all_topk_kernels(dev: DeviceInfo) -> list[tuple[str, str]]:
    """Every (source, name expression) ``plan_topk`` can choose on ``dev``,
    found by running it over every dtype pair and algorithm, k at the regime
    edges, short / long / unindexable rows and few / many rows."""
    dts = ("float16", "bfloat16", "float32", "float64")
    found: dict[tuple[str, str], None] = {}
    for ti in dts:
        for to in dts:
            for algo in TOPK_ALGORITHMS:
                for k in (1, TOPK_KP_MAX, TOPK_KP_MAX + 1):
                    for L in (k, 4 * TOPK_SPLIT_MIN_ELEMS, 10 ** 6, TOPK_MAX_PACKED_ROW + 1):
                        if L < k:
                            continue
                        for rows in (1, 10 ** 5):
                            p = plan_topk(rows, L, k, ti, to, dev, algo)
                            for name in p.kernels():
                                found[(p.source, name)] = None
            # seg: every unroll (short segments fit it, and pipeline) and mode
            for rows in (1, TOPK_SEG_FILL_ROWS, TOPK_SEG_ROWS_PER_SM * dev.sm_count):
                for L in (2048, 8192, 32768, 50257, 131072):
                    for kk in (1, 5, 50):
                        for alg in ("auto", "unfused"):
                            p = plan_topk(rows, L, kk, ti, to, dev, alg)
                            for name in p.kernels():
                                found[(p.source, name)] = None
            # csm: every cluster size (rows x size fills the SMs)
            for rows in (1, dev.sm_count // 8, dev.sm_count // 4, dev.sm_count // 2, dev.sm_count):
                for L in (2 ** 15, TOPK_CSM_ALL_K_ROW_BYTES // 4, 2 ** 20 // numpy.dtype(_np_name(ti)).itemsize):
                    p = plan_topk(rows, L, 64, ti, to, dev, "auto")
                    for name in p.kernels():
                        found[(p.source, name)] = None
    # seg and csm in both load forms (EF: the array's size alone decides it;
    # seg's tail, plain / TWO / PICK: k alone)
    for src, name in list(found):
        forms = _topk_load_forms(name)
        if name.startswith("topk_seg<"):
            forms = (_topk_load_forms(name, False, False) + _topk_load_forms(name, True, False)
                     + _topk_load_forms(name, False, True))
        for other in forms:
            found[(src, other)] = None
    return list(found)


def _topk_load_forms(name: str, two: Optional[bool] = None, pick: Optional[bool] = None) -> tuple:
    """Both load forms (EF off / on) of a topk_seg or topk_csm name; () else.
    ``two`` / ``pick`` None keeps a topk_seg name's TWO / PICK flag, True /
    False sets it."""
    kind, args = name[:-1].split("<", 1)
    a = args.split(", ")
    if kind == "topk_seg":
        head, f = topk_seg_flags(name)
        two = f["two"] if two is None else two
        pick = f["pick"] if pick is None else pick
        return (_topk_seg_name(head, f["pipe"], False, two, pick),
                _topk_seg_name(head, f["pipe"], True, two, pick))
    if kind == "topk_csm":
        return f"topk_csm<{', '.join(a[:2])}>", f"topk_csm<{', '.join(a[:2] + ['true'])}>"
    return ()
