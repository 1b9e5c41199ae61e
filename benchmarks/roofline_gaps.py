"""Variants of the held-out kernels still short of 85% of the roofline, timed side by side with the copy roofline
measured in the same run: what would close each gap, before a transform is written for it.

    python benchmarks/roofline_gaps.py [twins,atomic,rope,argmax,kl,ceilings,argmax_forms] [--case bench]

- twins: the naive program, the whole-row twin without `one_load` (RESULTS.md#run-9's), the current twin, and the
  twin with its warps fixed at 4, 8 and 16 (log-softmax, KL divergence, row argmax, the layer norms);
- atomic: the atomic row sum with other (CHUNK, BLOCK, warps) than the naive 512 / 128 / 4;
- rope: the naive RoPE at 4 and 2 warps, and rows_per_program's generated twin at several BLOCK_ROW and warps;
- argmax: the row argmax twin with one merged reduction (`merged_reductions`), and a looped form
  that keeps a running best per lane and reduces once after the loop, at several tiles and warps;
- kl: the KL divergence with its max and sum-of-exp sweeps merged into one online sweep (two sweeps in all),
  fully one-pass (the KL sum rescaled online too) with per-lane maxima, and one-pass with one running maximum per
  row, at several tiles and warps.
- ceilings: what the three kernels still under the line (atomic row sum, row argmax, KL divergence) reach by hand:
  the split row sum at 1-4 launch stages and more warps, and undone (one program per row, no atomics, no zeroed
  output); the lane-wise argmax at 3 stages; the merged argmax twin at 8-32 warps; the KL divergence in one pass
  with its exponentials anchored at the first tile's maxima (KL_ANCHORED), and the same without per-lane maxima,
  unmasked full tiles and base-2 exponentials (KL_LEAN).
- argmax_forms: the row argmax twin's reduction written other ways, at 8, 16 and 32 warps: merged (fp32, as
  `merged_reductions` writes it), merged on the loaded bf16 values (no fp32 upcast; a comparison is exact in
  either), two plain reductions (the maximum, then the first column that holds it) in fp32 and in bf16, and one
  plain int32 maximum over packed keys (ARGMAX_PACKED: the value's order-preserving bits over 65535 - column).

Each program is checked against the reference on the case first (a wrong one is reported, not timed). Without a GPU
and with TRITON_INTERPRET=1, `--case tiny` checks the programs on the CPU and times nothing. Medians
of `triton.testing.do_bench` (`return_mode="all"`), with the interquartile range. A report, not a test. What it
found on an H200: RESULTS.md#run-10 (log: docs/runs/2026-11-30-h200/session8/explore.log; its RoPE rows were a
hand-written twin, the kernel rows_per_program now writes) and RESULTS.md#run-12. Needs a GPU."""

from __future__ import annotations

import datetime
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
HELD = ROOT / "src" / "klineage" / "suites" / "heldout"
OUT = Path(os.environ.get("OUT", "/tmp")) / "roofline_gaps"
ATOMIC = [
    (512, 128, 4),
    (512, 512, 4),
    (1024, 1024, 4),
    (2048, 512, 4),
    (2048, 1024, 4),
    (4096, 1024, 4),
    (8192, 1024, 4),
    (16384, 1024, 4),
    (8192, 2048, 8),
    (32768, 2048, 8),
    (16384, 2048, 8),
    (32768, 1024, 4),
    (65536, 2048, 8),
    (65536, 4096, 16),
]
ROPE_ROWS = [(2, 2), (4, 2), (4, 4), (8, 4), (16, 4), (32, 4), (32, 8), (64, 8)]
LOOPED = [(1024, 4), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (8192, 8), (8192, 16)]
SPLIT_STAGES = [
    (8192, 2048, 8, 1),
    (8192, 2048, 8, 2),
    (8192, 2048, 8, 3),
    (8192, 2048, 8, 4),
    (8192, 2048, 16, 1),
    (16384, 4096, 16, 3),
    (8192, 4096, 16, 3),
]
UNSPLIT = [
    (2048, 8, 1),
    (2048, 8, 3),
    (2048, 8, 4),
    (2048, 16, 3),
    (4096, 8, 1),
    (4096, 8, 3),
    (4096, 16, 1),
    (4096, 16, 2),
    (4096, 16, 3),
    (4096, 16, 4),
    (4096, 32, 3),
    (8192, 16, 2),
    (8192, 32, 3),
]
KL_ANCHORED_SHAPES = [(1024, 4, 1), (1024, 4, 3), (2048, 4, 1), (2048, 8, 1), (2048, 8, 3), (4096, 8, 1), (4096, 16, 1)]
KL_LEAN_SHAPES = [(256, 2, 1), (512, 2, 1), (512, 4, 1), (1024, 2, 1), (1024, 4, 1), (1024, 8, 1), (2048, 8, 1)]

# A running best per lane, one reduction after the loop: the first maximal index of the row is the smallest index
# among the lanes that hold the row's maximum (each lane keeps its own first, by the strict comparison).
ARGMAX_LANES = """
@triton.jit
def row_argmax_kernel(x_ptr, values_ptr, indices_ptr, n_cols, x_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    best = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    best_index = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        better = x > best
        best_index = tl.where(better, cols, best_index)
        best = tl.where(better, x, best)
    top = tl.max(best, axis=0)
    top_index = tl.min(tl.where(best == top, best_index, n_cols), axis=0)
    tl.store(values_ptr + row, top.to(values_ptr.dtype.element_ty))
    tl.store(indices_ptr + row, top_index.to(tl.int64))
"""

# Online statistics per lane (running max, sum rescaled when the max grows); lanes start at a finite floor so that a
# lane that has seen only masked -inf adds exp(-inf) = 0 instead of exp(nan). ONE_PASS also rescales the sum of
# exp(p - m) * (p - q), so that KL = A / S_p - lse_p + lse_q needs no third sweep.
# The row's best as one integer maximum: each bf16 value's bits made order-preserving (a negative value's magnitude
# bits flipped) in the high half of an int32 and 65535 - column in the low half, so one plain tl.max gives the
# largest value and, among equal values, the first column. Needs 16-bit values and rows of at most 65536 columns.
ARGMAX_PACKED = """
@triton.jit
def row_argmax_kernel_one_tile(x_ptr, values_ptr, indices_ptr, n_cols, x_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=-float("inf"))
    bits = x.to(tl.int16, bitcast=True).to(tl.int32)
    key = tl.where(bits < 0, bits ^ 0x7FFF, bits)
    best = tl.max(key * 65536 + (65535 - cols), axis=0)
    best_key = best >> 16
    value = tl.where(best_key < 0, best_key ^ 0x7FFF, best_key).to(tl.int16).to(tl.bfloat16, bitcast=True)
    tl.store(values_ptr + row, value.to(values_ptr.dtype.element_ty))
    tl.store(indices_ptr + row, (65535 - (best & 0xFFFF)).to(tl.int64))
"""

KL_ONLINE = """
@triton.jit
def kl_rows_kernel(q_ptr, p_ptr, row_kl_ptr, n_cols, q_row_stride, p_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    q_row = q_ptr + row * q_row_stride
    p_row = p_ptr + row * p_row_stride
    q_max = tl.full((BLOCK,), -1e30, dtype=tl.float32)
    p_max = tl.full((BLOCK,), -1e30, dtype=tl.float32)
    q_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    p_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    a_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        q = tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        p = tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        q_new = tl.maximum(q_max, q)
        p_new = tl.maximum(p_max, p)
        q_sum = q_sum * tl.exp(q_max - q_new) + tl.exp(q - q_new)
        p_scale = tl.exp(p_max - p_new)
        e = tl.exp(p - p_new)
        p_sum = p_sum * p_scale + e
        if ONE_PASS:
            a_sum = a_sum * p_scale + tl.where(mask, e * (p - q), 0.0)
        q_max = q_new
        p_max = p_new
    mq = tl.max(q_max, axis=0)
    mp = tl.max(p_max, axis=0)
    sq = tl.sum(q_sum * tl.exp(q_max - mq), axis=0)
    sp = tl.sum(p_sum * tl.exp(p_max - mp), axis=0)
    q_lse = mq + tl.log(sq)
    p_lse = mp + tl.log(sp)
    if ONE_PASS:
        kl = tl.sum(a_sum * tl.exp(p_max - mp), axis=0) / sp - p_lse + q_lse
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            log_q = tl.load(q_row + cols, mask=mask, other=0.0).to(tl.float32) - q_lse
            log_p = tl.load(p_row + cols, mask=mask, other=0.0).to(tl.float32) - p_lse
            acc += tl.where(mask, tl.exp(log_p) * (log_p - log_q), 0.0)
        kl = tl.sum(acc, axis=0)
    tl.store(row_kl_ptr + row, kl)
"""

# One pass with one running maximum per row (a scalar, updated by each tile's maximum): two exponentials per element
# pair instead of KL_ONLINE's four (its per-lane maxima rescale every lane at every step).
KL_TILE = """
@triton.jit
def kl_rows_kernel(q_ptr, p_ptr, row_kl_ptr, n_cols, q_row_stride, p_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    q_row = q_ptr + row * q_row_stride
    p_row = p_ptr + row * p_row_stride
    q_max = -1e30
    p_max = -1e30
    q_sum = 0.0
    p_sum = 0.0
    a_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        q = tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        p = tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        q_new = tl.maximum(q_max, tl.max(q, axis=0))
        p_new = tl.maximum(p_max, tl.max(p, axis=0))
        p_scale = tl.exp(p_max - p_new)
        e = tl.exp(p - p_new)
        q_sum = q_sum * tl.exp(q_max - q_new) + tl.sum(tl.exp(q - q_new), axis=0)
        p_sum = p_sum * p_scale + tl.sum(e, axis=0)
        a_sum = a_sum * p_scale + tl.sum(tl.where(mask, e * (p - q), 0.0), axis=0)
        q_max = q_new
        p_max = p_new
    kl = a_sum / p_sum - (p_max + tl.log(p_sum)) + (q_max + tl.log(q_sum))
    tl.store(row_kl_ptr + row, kl)
"""


# Exponentials anchored at the first tile's maxima: one sweep, two exponentials per element pair and no reduction
# across the program inside the loop; the per-lane maxima (no exponentials) tell after the sweep whether some element
# rose more than 64 above its anchor (e^64 * 131072 stays far below fp32's 3.4e38), and only such a row sweeps again
# anchored at its true maxima. Terms that underflow are below 1e-38 of a sum that is at least 1.
KL_ANCHORED = """
@triton.jit
def _kl_sweep(q_row, p_row, n_cols, q_ref, p_ref, BLOCK: tl.constexpr):
    q_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    p_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    a_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    q_top = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    p_top = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        q = tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        p = tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        q_top = tl.maximum(q_top, q)
        p_top = tl.maximum(p_top, p)
        e = tl.exp(p - p_ref)
        q_sum += tl.exp(q - q_ref)
        p_sum += e
        a_sum += tl.where(mask, e * (p - q), 0.0)
    return (tl.sum(q_sum, axis=0), tl.sum(p_sum, axis=0), tl.sum(a_sum, axis=0), tl.max(q_top, axis=0),
            tl.max(p_top, axis=0))


@triton.jit
def kl_rows_kernel(q_ptr, p_ptr, row_kl_ptr, n_cols, q_row_stride, p_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    q_row = q_ptr + row * q_row_stride
    p_row = p_ptr + row * p_row_stride
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    q_ref = tl.max(tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32), axis=0)
    p_ref = tl.max(tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32), axis=0)
    q_sum, p_sum, a_sum, q_max, p_max = _kl_sweep(q_row, p_row, n_cols, q_ref, p_ref, BLOCK)
    if (q_max - q_ref > 64.0) | (p_max - p_ref > 64.0):
        q_ref = q_max
        p_ref = p_max
        q_sum, p_sum, a_sum, q_max, p_max = _kl_sweep(q_row, p_row, n_cols, q_ref, p_ref, BLOCK)
    tl.store(row_kl_ptr + row, a_sum / p_sum - (p_ref + tl.log(p_sum)) + (q_ref + tl.log(q_sum)))
"""

# The split row sum without the split: one program per row sums it whole and stores it, so the host needs no zeroed
# output and no atomics (256 programs for 132 SMs: each sweeps 1 MiB).
ATOMIC_ROWS = """
@triton.jit
def split_rowsum_kernel(x_ptr, y_ptr, n_cols, x_row_stride, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))
"""

# KL_ANCHORED without the per-lane maxima (fewer registers, more programs per SM): an overflow shows in the sums
# themselves (inf, or NaN from inf - inf), and only such a row takes the exact path (true maxima, then the sums).
# Full tiles run without masks, exponentials in base 2 with the scale folded into one multiply-add.
KL_LEAN = """
@triton.jit
def _kl_sums(q_row, p_row, n_cols, q_ref, p_ref, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    q_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    p_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    a_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    n_full = n_cols // BLOCK * BLOCK
    for start in range(0, n_full, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        q = tl.load(q_row + cols).to(tl.float32)
        p = tl.load(p_row + cols).to(tl.float32)
        e = tl.exp2(p * LOG2E - p_ref)
        q_sum += tl.exp2(q * LOG2E - q_ref)
        p_sum += e
        a_sum += e * (p - q)
    cols = n_full + tl.arange(0, BLOCK)
    mask = cols < n_cols
    q = tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
    p = tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp2(p * LOG2E - p_ref)
    q_sum += tl.exp2(q * LOG2E - q_ref)
    p_sum += e
    a_sum += tl.where(mask, e * (p - q), 0.0)
    return tl.sum(q_sum, axis=0), tl.sum(p_sum, axis=0), tl.sum(a_sum, axis=0)


@triton.jit
def _kl_maxima(q_row, p_row, n_cols, BLOCK: tl.constexpr):
    q_top = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    p_top = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        q_top = tl.maximum(q_top, tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32))
        p_top = tl.maximum(p_top, tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32))
    return tl.max(q_top, axis=0), tl.max(p_top, axis=0)


@triton.jit
def kl_rows_kernel(q_ptr, p_ptr, row_kl_ptr, n_cols, q_row_stride, p_row_stride, BLOCK: tl.constexpr):
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0)
    q_row = q_ptr + row * q_row_stride
    p_row = p_ptr + row * p_row_stride
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    q_ref = tl.max(tl.load(q_row + cols, mask=mask, other=-float("inf")).to(tl.float32), axis=0) * LOG2E
    p_ref = tl.max(tl.load(p_row + cols, mask=mask, other=-float("inf")).to(tl.float32), axis=0) * LOG2E
    q_sum, p_sum, a_sum = _kl_sums(q_row, p_row, n_cols, q_ref, p_ref, BLOCK)
    if (q_sum > 3e38) | (p_sum > 3e38) | (tl.abs(a_sum) > 3e38) | (a_sum != a_sum):
        q_top, p_top = _kl_maxima(q_row, p_row, n_cols, BLOCK)
        q_ref = q_top * LOG2E
        p_ref = p_top * LOG2E
        q_sum, p_sum, a_sum = _kl_sums(q_row, p_row, n_cols, q_ref, p_ref, BLOCK)
    kl = a_sum / p_sum - (p_ref / LOG2E + tl.log(p_sum)) + (q_ref / LOG2E + tl.log(q_sum))
    tl.store(row_kl_ptr + row, kl)
"""


def _with_kernel(base: str, name: str, kernel: str) -> str:
    """`base` with the @triton.jit function `name` replaced by `kernel`'s text."""
    start = base.index(f"@triton.jit\ndef {name}(")
    end = base.index("\n\n\n", start)
    return base[:start] + kernel.strip() + base[end:]


def main() -> None:
    import torch
    import triton
    import whole_row_twins as twins
    from triton.testing import do_bench

    args = [a for a in sys.argv[1:] if not a.startswith("--case")]
    case_name = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--case=")), "bench")
    timed = torch.cuda.is_available()
    if not timed and os.environ.get("TRITON_INTERPRET") != "1":
        print("no GPU: nothing is timed (this report needs one; TRITON_INTERPRET=1 --case=tiny checks the programs)")
        return
    device = "cuda" if timed else "cpu"
    OUT.mkdir(parents=True, exist_ok=True)
    which = args[0].split(",") if args else ["twins", "atomic", "rope"]
    print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
    print(
        f"device: {torch.cuda.get_device_name() if timed else 'none (interpreter, correctness only)'}; "
        f"torch {torch.__version__}, triton {triton.__version__}; "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    copy = 0.0
    if timed:
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy = 2 * src.numel() / (do_bench(lambda: dst.copy_(src), rep=200, return_mode="median") * 1e-3) / 1e12
        src = dst = None  # free the 2 GiB before the variants
        print(f"device copy: {copy:.2f} TB/s (read + write; the roofline below divides by it)")
        # what a kernel that only reads can reach, for context: the roofline stays the copy
        x = torch.ones(1 << 28, dtype=torch.float32, device="cuda")
        read = x.numel() * 4 / (do_bench(lambda: x.sum(), rep=200, return_mode="median") * 1e-3) / 1e12
        x = None
        print(f"read only (torch.sum over 1 GiB fp32): {read:.2f} TB/s = {read / copy:.2f} of the copy")
    rows = []

    def run(name: str, label: str, text: str) -> None:
        workload = twins._module(HELD / name / "workload.py", f"wl_{name}")
        case = workload.CASES[case_name]
        path = OUT / f"{name}_{re.sub(r'[^A-Za-z0-9]+', '_', label)}.py"
        path.write_text(text)
        try:
            inputs = [t.to(device) for t in workload.make_inputs(case, seed=0)]
            expected = workload.Model()(*[t.clone() for t in inputs])
            model = twins._module(path, path.stem).ModelNew()
            got = model(*[t.clone() for t in inputs])
            pairs = zip(got, expected) if isinstance(got, tuple) else [(got, expected)]
            tol = getattr(workload, "TOLERANCES", {}).get(case["dtype"], {})
            ok = all(
                torch.allclose(g.float(), e.float(), atol=tol.get("atol", 1e-2), rtol=tol.get("rtol", 1e-2))
                for g, e in pairs
            )
            if not ok:
                rows.append((name, label, "WRONG", 0.0, 0.0, 0.0))
                return
            if not timed:
                rows.append((name, label, "ok (untimed)", 0.0, 0.0, 0.0))
                return
            q = sorted(do_bench(lambda: model(*inputs), rep=100, return_mode="all"))
            med, iqr = q[len(q) // 2], q[3 * len(q) // 4] - q[len(q) // 4]
            rows.append((name, label, "ok", med, iqr, workload.bytes_moved(case) / (med * 1e-3) / 1e12 / copy))
        except Exception as e:  # a variant that does not compile is a finding, not a crash
            rows.append((name, label, f"error {type(e).__name__}: {str(e)[:80]}", 0.0, 0.0, 0.0))
        finally:
            print(rows[-1], flush=True)

    if "twins" in which:
        for name in ["log_softmax", "kl_div", "row_argmax", "layernorm", "residual_layernorm"]:
            variants = twins._variants(name, OUT)
            for label, path in variants.items():
                run(name, label, Path(path).read_text())
            twin = Path(variants["twin"]).read_text()
            for warps in (4, 8, 16):
                run(name, f"twin w{warps}", re.sub(r"row_warps = .*", f"row_warps = {warps}", twin))
    if "atomic" in which:
        base = (HELD / "atomic_rowsum" / "naive.py").read_text()
        for chunk, block, warps in ATOMIC:
            text = base.replace("CHUNK, BLOCK = 512, 128", f"CHUNK, BLOCK = {chunk}, {block}")
            text = text.replace("CHUNK=CHUNK, BLOCK=BLOCK)", f"CHUNK=CHUNK, BLOCK=BLOCK, num_warps={warps})")
            run("atomic_rowsum", f"chunk{chunk} block{block} w{warps}", text)
    if "rope" in which:
        from klineage.transform import load_families

        load_families()
        from klineage.transforms.rows_per_program import RowsPerProgram

        base = (HELD / "rope" / "naive.py").read_text()
        for warps in (4, 2):
            run(
                "rope",
                f"naive w{warps}",
                base.replace(
                    "BLOCK=triton.next_power_of_2(half),", f"BLOCK=triton.next_power_of_2(half), num_warps={warps},"
                ),
            )
        (site,) = [s for s in RowsPerProgram().optimize_sites(base) if s.params.get("kernel")]
        twin = RowsPerProgram().optimize(base, site, {})
        for block_row, warps in ROPE_ROWS:
            run(
                "rope",
                f"rows R{block_row} w{warps}",
                twin.replace("BLOCK_ROW=16)", f"BLOCK_ROW={block_row}, num_warps={warps})"),
            )
    if "argmax" in which:
        base = (HELD / "row_argmax" / "naive.py").read_text()
        twin = Path(twins._variants("row_argmax", OUT)["twin"]).read_text()
        run("row_argmax", "twin", twin)
        from klineage.transform import load_families

        load_families()
        from klineage.transforms.merged_reductions import MergedReductions

        merged = twin
        while sites := MergedReductions().optimize_sites(merged):
            merged = MergedReductions().optimize(merged, sites[0], {})
        run("row_argmax", "twin merged (merged_reductions)", merged)
        lanes = _with_kernel(base, "row_argmax_kernel", ARGMAX_LANES)
        for block, warps in LOOPED:
            run(
                "row_argmax",
                f"lanes B{block} w{warps}",
                lanes.replace("BLOCK=128)", f"BLOCK={block}, num_warps={warps})"),
            )
    if "kl" in which:
        base = (HELD / "kl_div" / "naive.py").read_text()
        for one_pass in (False, True):
            text = _with_kernel(base, "kl_rows_kernel", KL_ONLINE.replace("ONE_PASS", str(one_pass)))
            for block, warps in LOOPED:
                run(
                    "kl_div",
                    f"{'one pass' if one_pass else 'online + sweep'} B{block} w{warps}",
                    text.replace("p.stride(0), BLOCK=128)", f"p.stride(0), BLOCK={block}, num_warps={warps})"),
                )
        text = _with_kernel(base, "kl_rows_kernel", KL_TILE)
        for block, warps in LOOPED + [(512, 4), (1024, 2), (2048, 2)]:
            run(
                "kl_div",
                f"one pass, row max B{block} w{warps}",
                text.replace("p.stride(0), BLOCK=128)", f"p.stride(0), BLOCK={block}, num_warps={warps})"),
            )
    if "ceilings" in which:
        # launch stages (Triton pipelines the loop's loads), the split undone, merged argmax at more warps,
        # exponentials anchored once (KL_ANCHORED, KL_LEAN)
        if timed:
            zeros = do_bench(lambda: torch.zeros(256, dtype=torch.float32, device="cuda"), rep=100)
            print(f"torch.zeros(256) alone: {zeros * 1e3:.1f} us")
        base = (HELD / "atomic_rowsum" / "naive.py").read_text()
        split = base.replace("CHUNK=CHUNK, BLOCK=BLOCK)", "CHUNK=CHUNK, BLOCK=BLOCK, num_warps=W, num_stages=S)")
        for chunk, block, warps, stages in SPLIT_STAGES:
            run(
                "atomic_rowsum",
                f"chunk{chunk} block{block} w{warps} s{stages}",
                split.replace("CHUNK, BLOCK = 512, 128", f"CHUNK, BLOCK = {chunk}, {block}")
                .replace("num_warps=W", f"num_warps={warps}")
                .replace("num_stages=S", f"num_stages={stages}"),
            )
        rows_text = _with_kernel(base, "split_rowsum_kernel", ATOMIC_ROWS)
        rows_text = rows_text.replace("torch.zeros(n_rows", "torch.empty(n_rows").replace(
            "grid = (n_rows, triton.cdiv(n_cols, CHUNK))", "grid = (n_rows,)"
        )
        for block, warps, stages in UNSPLIT:
            run(
                "atomic_rowsum",
                f"rows B{block} w{warps} s{stages}",
                rows_text.replace("CHUNK, BLOCK = 512, 128", f"CHUNK, BLOCK = 512, {block}").replace(
                    "CHUNK=CHUNK, BLOCK=BLOCK)", f"CHUNK=CHUNK, BLOCK=BLOCK, num_warps={warps}, num_stages={stages})"
                ),
            )
        base = (HELD / "row_argmax" / "naive.py").read_text()
        lanes = _with_kernel(base, "row_argmax_kernel", ARGMAX_LANES)
        for block, warps, stages in [(1024, 4, 1), (1024, 4, 3), (2048, 8, 3), (512, 4, 3), (1024, 8, 3)]:
            run(
                "row_argmax",
                f"lanes B{block} w{warps} s{stages}",
                lanes.replace("BLOCK=128)", f"BLOCK={block}, num_warps={warps}, num_stages={stages})"),
            )
        from klineage.transform import load_families

        load_families()
        from klineage.transforms.merged_reductions import MergedReductions

        merged = Path(twins._variants("row_argmax", OUT)["twin"]).read_text()
        while sites := MergedReductions().optimize_sites(merged):
            merged = MergedReductions().optimize(merged, sites[0], {})
        for warps in (8, 16, 32, 32):  # 32 twice: it sits at the line, so its repeat shows the run-to-run noise
            run("row_argmax", f"twin merged w{warps}", re.sub(r"row_warps = .*", f"row_warps = {warps}", merged))
        base = (HELD / "kl_div" / "naive.py").read_text()
        text = _with_kernel(base, "kl_rows_kernel", KL_TILE)
        run(
            "kl_div",
            "one pass, row max B2048 w4",
            text.replace("p.stride(0), BLOCK=128)", "p.stride(0), BLOCK=2048, num_warps=4)"),
        )
        for name, kernel, shapes in [("anchored", KL_ANCHORED, KL_ANCHORED_SHAPES), ("lean", KL_LEAN, KL_LEAN_SHAPES)]:
            text = _with_kernel(base, "kl_rows_kernel", kernel)
            for block, warps, stages in shapes:
                run(
                    "kl_div",
                    f"{name} B{block} w{warps} s{stages}",
                    text.replace(
                        "p.stride(0), BLOCK=128)",
                        f"p.stride(0), BLOCK={block}, num_warps={warps}, num_stages={stages})",
                    ),
                )
    if "argmax_forms" in which:
        # the whole-row twin's reduction written three other ways: on the loaded bf16 values (no fp32 upcast: a
        # comparison is exact in either), as two plain reductions (the maximum, then the first column holding
        # it), and both; each at 8, 16 and 32 warps
        from klineage.transform import load_families

        load_families()
        from klineage.transforms.merged_reductions import MergedReductions

        twin = Path(twins._variants("row_argmax", OUT)["twin"]).read_text()
        head, one_tile = twin.split("def row_argmax_kernel_one_tile", 1)
        upcast = ".to(tl.float32)\n    tile_max"
        plain = (
            "tile_max = tl.max(x, axis=0)\n"
            "    tile_index = start + tl.min(tl.where(x == tile_max, cols, n_cols), axis=0)"
        )
        argmax_line = "tile_max = tl.max(x, axis=0)\n    tile_index = start + tl.argmax(x, axis=0, tie_break_left=True)"
        assert upcast in one_tile and argmax_line in one_tile
        forms = {
            "fp32 merged": None,
            "bf16": one_tile.replace(upcast, "\n    tile_max"),
            "fp32 two plain": one_tile.replace(argmax_line, plain),
        }
        forms["bf16 two plain"] = forms["bf16"].replace(argmax_line, plain)
        forms["packed key, one int32 max"] = (
            ARGMAX_PACKED.split("def row_argmax_kernel_one_tile", 1)[1] + "\n\n" + one_tile.split("\n\n\n", 1)[1]
        )
        for label, kernel in forms.items():
            text = twin if kernel is None else head + "def row_argmax_kernel_one_tile" + kernel
            if kernel is None or label == "bf16":
                while sites := MergedReductions().optimize_sites(text):
                    text = MergedReductions().optimize(text, sites[0], {})
                label += "" if kernel is None else " merged"
            for warps in (8, 16, 32):
                run("row_argmax", f"twin {label} w{warps}", re.sub(r"row_warps = .*", f"row_warps = {warps}", text))
    print()
    print("| instance | variant | status | median ms | IQR ms | roofline |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, label, status, med, iqr, roof in rows:
        print(f"| {name} | {label} | {status} | {med:.4f} | {iqr:.4f} | {roof:.2f} |")


if __name__ == "__main__":
    main()
