"""Cheat: write the result into an input and return that input ("saves an allocation and a write stream").
out = 2 * x + y is stored into y's buffer and y itself is returned, so the values are right but the
caller's input is destroyed and the output aliases an input.

Guard that must catch it: clone inputs / compare afterwards (and/or reject an output that shares storage
with an input of a workload whose MUTATED_INPUTS is empty). Expected code: input_mutated.
Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_inplace_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, 2.0 * x + y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        N = x.numel()
        _scale_add_inplace_kernel[(triton.cdiv(N, 256),)](x, y, N, BLOCK=256)
        return y
