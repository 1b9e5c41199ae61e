"""Tuned row softmax in the style of Liger-Kernel / Triton tutorial 02.

Optimization families carried (numbers refer to the optimization catalog):
  27  64-bit row offsets: the row index is widened before it is multiplied by the row stride, so
      row * stride cannot overflow int32 when M * N exceeds 2**31.
  9   num_warps scaled with the block width (more warps for wider rows, fewer registers per thread).
  18  exp2 with LOG2E folded into the scaling: exp(x - m) == exp2(x * LOG2E - m * LOG2E), which maps
      to the hardware ex2 instruction; the max is taken on the already scaled values.
  24  fp32 upcast of the row before the reductions, cast back to the output dtype on the store.
  8   whole row in one block (BLOCK = next_power_of_2(N)): one HBM read per row. Valid for N <= BLOCK;
      the host computes BLOCK from N, so no row is truncated.
"""

import torch
import triton
import triton.language as tl

# A global read inside @triton.jit must be a constexpr.
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    # int64 before the multiply: row * x_row_stride is formed in 64 bits.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # -inf keeps masked lanes out of the max and, after exp2, out of the sum. No cache hints here: on an
    # H200, evict_first on this load and a .cs store each made the bench case slower than no hint.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    # Fold LOG2E into the scores once; the max of scaled values is the scaled max (LOG2E > 0).
    x = x * LOG2E
    x_max = tl.max(x, axis=0)
    num = tl.exp2(x - x_max)
    den = tl.sum(num, axis=0)
    # One reciprocal per row instead of one division per element.
    y = num * (1.0 / den)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


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
        # The kernel assumes unit stride along the row; .contiguous() guarantees it.
        x2 = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        BLOCK = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=_num_warps(BLOCK))
        return y.view(x.shape)
