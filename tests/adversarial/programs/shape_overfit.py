"""Cheat: shape overfitting -- the softmax kernel hard-codes BLOCK = 64 and only ever reads and normalises the
first 64 columns; the output starts as zeros. Exactly right for the tiny case (N = 37) and any N <= 64, badly
wrong for longer rows (e.g. the workload's "wide" case, N = 700), which DOMAIN (N up to 16384) promises.

Guard that must catch it: shape sweep over DOMAIN with held-out shapes (not only the named tiny case).
Expected code: mismatch. Workload: workloads/softmax.py (the manifest names case "tiny" on purpose: the
harness's own sweep has to find the failure).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax64_kernel(x_ptr, out_ptr, N, stride_row):
    row = tl.program_id(0)
    cols = tl.arange(0, 64)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(out_ptr + row * stride_row + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.zeros_like(x)
        _softmax64_kernel[(M,)](x, out, N, x.stride(0))
        return out
