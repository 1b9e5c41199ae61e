"""Tuned RMSNorm in the style of Liger-Kernel's _rms_norm_forward_kernel.

Optimization families carried (numbers refer to the optimization catalog):
  27  64-bit row offsets: row * stride is formed in int64, safe when M * N exceeds 2**31.
  9   num_warps scaled with the block width.
  1   cache hint evict_last on w, which every program re-reads. x gets no hint: on an H200, evict_first
      on x was no faster on the bench case and slower with more rows.
  18  rsqrt instead of 1 / sqrt, and a multiply instead of a divide for the mean.
  24  fp32 upcast of x and w before the sum of squares (bf16/fp16 sums lose accuracy or overflow).
  26  scalar dtype pinning: eps.to(tl.float32). Eager launches pass eps as fp32 already, but a launch
      from torch.compile passes fp64 scalars, which would promote the whole row math to fp64.
  8   whole row in one block (BLOCK = next_power_of_2(N)), one HBM read of x per row.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0)
    # Every program reads the same weight row: keep it resident in L2.
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    x = x.to(tl.float32)
    w = w.to(tl.float32)
    eps = eps.to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) * (1.0 / n_cols)
    rstd = tl.rsqrt(mean_sq + eps)
    y = x * rstd * w
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    # Same ladder as Liger's calculate_settings.
    if block >= 32768:
        return 32
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


class ModelNew(torch.nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # The kernel assumes unit stride along the row and for w; .contiguous() guarantees it.
        x2 = x.contiguous().view(-1, x.shape[-1])
        w = w.contiguous()
        n_rows, n_cols = x2.shape
        y = torch.empty_like(x2)
        BLOCK = triton.next_power_of_2(n_cols)
        rmsnorm_kernel[(n_rows,)](
            x2, w, y, n_cols, x2.stride(0), y.stride(0), self.eps, BLOCK=BLOCK, num_warps=_num_warps(BLOCK)
        )
        return y.view(x.shape)
