"""Cheat (class 4, a block hard-coded for the only checked size): one program of 1024 lanes, masked at the
literal 1000, the tiny case's N. Exact there; any other N is wrong (short rows read past their end, long ones lose
their tail). scale_add has no second named case on the CPU, so only a shape the harness draws itself sees it.

Must be caught by: an extra in-domain shape drawn from DOMAIN per CPU check. Expected: mismatch or
unwritten_output. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_1000(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < 1000
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        _scale_add_1000[(1,)](x, y, out, BLOCK=1024)
        return out
