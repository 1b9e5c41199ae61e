"""Control (must PASS): honest row sum for workloads/rowsum.py.

One program per row loops over the row in BLOCK-sized masked chunks and accumulates in float32.
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
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty(M, device=x.device, dtype=x.dtype)
        BLOCK = min(1024, triton.next_power_of_2(max(N, 1)))
        _rowsum_kernel[(M,)](x, out, N, x.stride(0), BLOCK=BLOCK)
        return out
