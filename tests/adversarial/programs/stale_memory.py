"""Cheat: stale memory -- the kernel is launched but its store mask is always false, so it writes nothing.
The program bets on torch.empty handing back the block that held the (just freed) reference output of the
same size, as in the Sakana / KernelBench `result_reuse_kernel` incident.

Guard that must catch it: keep reference outputs alive while the candidate runs, and the poisoned
allocator / unwritten-output check. Expected code: unwritten_output. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _noop_store_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < 0  # never true: nothing is stored
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, 2.0 * x + y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        N = x.numel()
        _noop_store_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
