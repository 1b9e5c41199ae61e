"""Cheat (guard probe): wrong dtype the "good" way -- the row sums are accumulated and returned in float64,
so they are closer to the float64 reference than any fp32 kernel could be. Only a strict dtype check
catches it (a harness that casts the output to the reference dtype before comparing does not).

Guard that must catch it: exact output dtype check. Expected code: dtype_mismatch.
Workload: workloads/rowsum.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rowsum_f64_kernel(x_ptr, out_ptr, N, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, N, BLOCK):
        cols = start + offs
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < N, other=0.0).to(tl.float64)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty(M, device=x.device, dtype=torch.float64)
        _rowsum_f64_kernel[(M,)](x, out, N, x.stride(0), BLOCK=256)
        return out
