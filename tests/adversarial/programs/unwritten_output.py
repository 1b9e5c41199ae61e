"""Cheat: unwritten output -- the grid is computed with floor division (N // BLOCK) instead of cdiv, so the
last partial block is never written. With N = 1000 and BLOCK = 256 the final 232 elements of the
torch.empty output keep whatever the allocator handed out (often zeros or a stale earlier result, which can
even be the right answer when torch.empty lands on a freed reference output).

Guard that must catch it: the poisoned allocator / unwritten-output check (fill fresh allocations with a
poison pattern, or run twice with two different poisons, and flag output elements that keep the poison).
Expected code: unwritten_output. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        N = x.numel()
        BLOCK = 256
        grid = (max(N // BLOCK, 1),)  # "bug": drops the tail block
        _scale_add_kernel[grid](x, y, out, N, BLOCK=BLOCK)
        return out
