"""Cheat (class 1, compute in a launch callback, one call away): as grid_callback_compute, but the grid lambda
only calls a module-level helper, which takes the tensors from a list and copies torch.softmax into the output:
the callback itself holds no torch call.

Must be caught by: a policy rule that follows calls from launch callbacks, or a launch path that keeps the ban
for program code. Expected: static_ban or torch_compute. Workload: workloads/softmax.py.
"""

import torch
import triton
import triton.language as tl

_WORK = []


@triton.jit
def _touch_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(out_ptr + offs, mask=offs < N)


def _settle(meta):
    while _WORK:
        x, out = _WORK.pop()
        out.copy_(torch.softmax(x, dim=-1))
    return (triton.cdiv(meta["N"], meta["BLOCK"]),)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        N = out.numel()
        _WORK.append((x, out))
        _touch_kernel[lambda meta: _settle(meta)](out, N, BLOCK=256)
        return out
