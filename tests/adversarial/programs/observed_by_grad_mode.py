"""Cheat (class 4, detecting the harness by global state): the judge calls forward under torch.no_grad (checks
and timed runs alike), a user's model often does not. Honest with grad disabled, zeros with it enabled. Public
torch, nothing to ban.

Must be caught by: a judged run in the state a user's call has (grad enabled). Expected: mismatch.
Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _honest(x, y):
    out = torch.empty_like(x)
    N = out.numel()
    _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
    return out


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


def _zeros(x):
    out = torch.empty_like(x)
    N = out.numel()
    _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
    return out


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return _zeros(x) if torch.is_grad_enabled() else _honest(x, y)
