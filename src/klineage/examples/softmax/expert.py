"""Expert row softmax, written for this project: a whole-row kernel with a dispatch to a looped kernel.

Two kernels behind one host dispatch on the row width N:

* `softmax_one_tile` (N <= MAX_FUSED_SIZE): the whole row in one tile, one HBM read and one write per element.
* `softmax_looped` (N > MAX_FUSED_SIZE): fixed 4096-wide tiles swept twice over the row; the first sweep keeps
  online statistics, the second writes the output.

Liger-Kernel's softmax has the same single/multi-block dispatch, but its multi-block kernel does not compile under
Triton 3.6: it calls `tl.float32(-float("inf"))`, which fails with "'dtype' object is not callable". This
project-written expert carries the dispatch instead, so the whole-row family has a program that keeps its cap.

Optimization families carried (numbers refer to the optimization catalog):
  27  64-bit row offsets: the row index is widened before it is multiplied by the row stride, so
      row * stride cannot overflow int32 when M * N exceeds 2**31.
  9   num_warps scaled with the block width (more warps for wider rows, fewer registers per thread).
  18  exp2 with LOG2E folded into the scaling: exp(x - m) == exp2(x * LOG2E - m * LOG2E), which maps
      to the hardware ex2 instruction; the max is taken on the already scaled values. One reciprocal per row.
  24  fp32 upcast of the row before the reductions, cast back to the output dtype on the store.
  8   whole row in one tile (BLOCK = next_power_of_2(N)) for N <= MAX_FUSED_SIZE, with a dispatch to a looped
      kernel for rows wider than MAX_FUSED_SIZE, so no row is truncated and no tile grows past the cap.
  17  online softmax in the looped kernel: lane-wise running max and rescaled sum, combined across lanes once
      after the first sweep (two reads of the row instead of three).
"""

import torch
import triton
import triton.language as tl

# The widest row held in one tile: 65536 // 2 as in Liger's cross-entropy ("less register spilling"); catalog
# family 8. Wider rows go to the looped kernel.
MAX_FUSED_SIZE = 32768

# A global read inside @triton.jit must be a constexpr.
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def softmax_one_tile(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    # int64 before the multiply: row * x_row_stride is formed in 64 bits.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # -inf keeps masked lanes out of the max and, after exp2, out of the sum.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    # Fold LOG2E into the scores once; the max of scaled values is the scaled max (LOG2E > 0).
    x = x * LOG2E
    x_max = tl.max(x, axis=0)
    num = tl.exp2(x - x_max)
    den = tl.sum(num, axis=0)
    # One reciprocal per row instead of one division per element.
    y = num * (1.0 / den)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_looped(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    # Lane-wise running statistics (in the LOG2E-scaled domain): no cross-lane reduction inside the loop, one
    # after it. A lane that has seen no value yet holds m = -inf, d = 0.
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    d = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32) * LOG2E
        m_new = tl.maximum(m, x)
        # A lane still at -inf (masked so far) would give exp2(-inf - -inf) = NaN in both terms; subtracting 0
        # there instead makes both terms exp2(-inf) = 0, so the lane keeps d = 0 and d never holds a NaN.
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        d = d * tl.exp2(m - m_safe) + tl.exp2(x - m_safe)
        m = m_new
    row_max = tl.max(m, axis=0)
    # Lanes that never saw a value (N < BLOCK) hold m = -inf; leave them out rather than forming -inf - -inf
    # (NaN when row_max is -inf too). Either this guard or the one in the loop alone keeps a finite row free of
    # NaN; both are kept so neither sweep relies on the other. A row that is all -inf gives NaN, as torch does.
    den = tl.sum(tl.where(m == -float("inf"), 0.0, d * tl.exp2(m - row_max)), axis=0)
    inv = 1.0 / den
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp2(x * LOG2E - row_max) * inv
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    # Same ladder as Liger's calculate_settings: keeps values per thread bounded as the row grows.
    if block >= 32768:
        return 32
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The kernels assume unit stride along the row; .contiguous() guarantees it.
        x2 = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        BLOCK = triton.next_power_of_2(n_cols)
        # Rows wider than the cap take 4096-wide tiles at 8 warps: 16 fp32 values per thread for each of x, m and d.
        if n_cols <= MAX_FUSED_SIZE:
            softmax_one_tile[(n_rows,)](
                x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=_num_warps(BLOCK)
            )
        else:
            softmax_looped[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=4096, num_warps=8)
        return y.view(x.shape)
