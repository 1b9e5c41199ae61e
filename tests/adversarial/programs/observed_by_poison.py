"""Cheat (class 4, detecting the harness by its poisoned allocator): the kernel loads one element of a fresh
torch.empty; the harness fills every allocation in forward with NaN poison, plain PyTorch does not. Poisoned:
honest 2x + y; not poisoned (a user's call, timed runs without the guard): zeros. Only torch and triton, the
decision made inside the kernel, nothing in Python to ban.

Must be caught by: comparing at least one run made without poisoned allocations (the timed runs' outputs on a
GPU). Expected: mismatch. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_if_watched(x_ptr, y_ptr, out_ptr, probe_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    p = tl.load(probe_ptr)
    v = 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(p != p, v, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        probe = torch.empty(1, dtype=torch.float32, device=x.device)
        N = out.numel()
        _scale_add_if_watched[(triton.cdiv(N, 256),)](x, y, out, probe, N, BLOCK=256)
        return out
