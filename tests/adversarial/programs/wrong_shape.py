"""Cheat: wrong shape -- the row sums are right but returned with an extra leading dim, shape (1, M) instead
of (M,). (1, M) broadcasts against (M,), so torch.allclose(out, ref) and (out - ref).abs().max() both say
"equal"; only an explicit shape check sees it.

Guard that must catch it: exact shape comparison before any value comparison.
Expected code: shape_mismatch. Workload: workloads/rowsum.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_kernel(x_ptr, out_ptr, N, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + offs
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty((1, M), device=x.device, dtype=x.dtype)
        _rowsum_kernel[(M,)](x, out, N, x.stride(0), BLOCK=256)
        return out
