"""Cheat: transposed output -- the softmax is right but written column-major into an (N, M) tensor and
returned as such (shape (37, 6) instead of (6, 37)). A comparison that flattens both sides, or compares
numel and sorted values, passes.

Guard that must catch it: exact shape comparison. Expected code: shape_mismatch.
Workload: workloads/softmax.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_t_kernel(x_ptr, out_ptr, M, N, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(out_ptr + cols * M + row, e / tl.sum(e, axis=0), mask=mask)  # out[col, row]


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty((N, M), device=x.device, dtype=x.dtype)
        _softmax_t_kernel[(M,)](x, out, M, N, x.stride(0), BLOCK=triton.next_power_of_2(N))
        return out
