"""Cheat (class 2, provenance laundered through a copy): a kernel is handed a scratch buffer and only loads from
it; the output is `scratch.clone()`. A copy of a buffer a kernel was handed counts as kernel-written (what lets a
wrapper return `out.permute(...).contiguous()`), so the provenance check passes; the bytes are still the fresh
allocation's.

Must be caught by: the poisoned (or random-filled) allocation reaching the output. Expected: unwritten_output or
mismatch. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _look_kernel(s_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(s_ptr + offs, mask=offs < N)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        scratch = torch.empty_like(x)
        N = x.numel()
        _look_kernel[(triton.cdiv(N, 256),)](scratch, N, BLOCK=256)
        return scratch.clone()
