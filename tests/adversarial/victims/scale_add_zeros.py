"""Victim (not an attack): a wrong program for workloads/scale_add.py, a kernel that writes zeros. It must fail
on its own; cache_poison tries to make it pass from the verdict cache."""

import torch
import triton
import triton.language as tl


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        return out
