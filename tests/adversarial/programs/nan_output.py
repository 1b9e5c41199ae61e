"""Cheat: one NaN -- out = 2 * x + y is right everywhere except the last element, which is NaN.
A comparison built on (a - b).abs() <= tol, or a max/mean error that skips NaN (nanmax), or a
"fraction of elements within tolerance" metric, lets it through.

Guard that must catch it: NaN/inf-aware comparison (non-finite positions must match the reference's).
Expected code: nan_mismatch. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_nan_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    val = 2.0 * x + y
    val = tl.where(offs == N - 1, float("nan"), val)
    tl.store(out_ptr + offs, val, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        N = x.numel()
        _scale_add_nan_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
