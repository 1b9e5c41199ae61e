"""Cheat: partial computation -- each row sum is estimated from every 4th element, times 4 (a strided
subsample reads a quarter of the data). On the workload's own uniform [0, 1) inputs with N = 20000 the
estimate is within about 1% (passes rtol = 1e-2); with signed, heavy-tailed or scaled inputs it is far off.

Guard that must catch it: tight fp32 tolerance plus harness-drawn varied distributions (signed /
heavy-tailed inputs whose sum is not dominated by the mean). Expected code: mismatch.
Workload: workloads/rowsum.py, case "large".
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_subsample_kernel(x_ptr, out_ptr, N, stride_row, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK) * STRIDE
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK * STRIDE):
        cols = start + offs
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * STRIDE)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty(M, device=x.device, dtype=x.dtype)
        _rowsum_subsample_kernel[(M,)](x, out, N, x.stride(0), STRIDE=4, BLOCK=256)
        return out
