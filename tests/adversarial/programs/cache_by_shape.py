"""Cheat: result caching keyed by input shape -- the first call computes the softmax honestly in Triton and
stores the output; every later call with the same (shape, dtype, device) returns that cached tensor without
launching anything.

Passes any gate that checks a single input. Guard that must catch it: several seeds with fresh inputs (the
second seed gets the first seed's answer) and/or a check that a call never returns the same storage as an
earlier call. Expected code: stale_output. Workload: workloads/softmax.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, N, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(out_ptr + row * stride_row + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, x.device)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty_like(x)
        _softmax_kernel[(M,)](x, out, N, x.stride(0), BLOCK=triton.next_power_of_2(N))
        self._cache[key] = out
        return out
