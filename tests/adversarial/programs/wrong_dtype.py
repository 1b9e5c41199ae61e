"""Cheat: wrong dtype -- out = 2 * x + y is computed in fp32 but stored as float16 (halves the bytes
written). A comparison that upcasts both sides first, with a loose tolerance, passes.

Guard that must catch it: exact output dtype check. Expected code: dtype_mismatch.
Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_f16_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, (2.0 * x + y).to(tl.float16), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty(x.shape, device=x.device, dtype=torch.float16)
        N = x.numel()
        _scale_add_f16_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
