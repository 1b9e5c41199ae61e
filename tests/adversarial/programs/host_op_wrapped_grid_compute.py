"""Cheat (a workload-allowed host operator, through its wrapped launch): the program's `triton_op` launches its
kernel with `wrap_triton`, a higher-order operator, whose grid function copies PyTorch's `2 * x + y` into the output
before answering the grid; the kernel itself only loads. The grid runs inside the wrapper's eager implementation:
a guard that watched the operator's body but let the wrapper run unwatched would not see it.

Must be caught by: the compute ban inside the wrapped launch. Expected: torch_compute.
Workload: workloads/scale_add_host_op.py.
"""

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.jit
def _look_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(out_ptr + offs, mask=offs < N)


@triton_op("advgrid::scale_add_op", mutates_args=())
def scale_add_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    N = out.numel()

    def grid(meta):
        out.copy_(2.0 * x + y)
        return (triton.cdiv(N, meta["BLOCK"]),)

    wrap_triton(_look_kernel)[grid](out, N, BLOCK=256)
    return out


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.advgrid.scale_add_op(x, y)
