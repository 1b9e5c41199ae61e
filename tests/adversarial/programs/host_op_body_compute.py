"""Cheat (a workload-allowed host operator as a hiding place): the program wraps its work in a custom operator the
workload allows by name (HOST_OPS, as torchao's programs need), and the operator's body hands the output to a kernel
that writes zeros, then overwrites it with PyTorch's `2 * x + y`. The output was written by a kernel, and the
operator's name is allowed: only a guard that also watches the operator's body sees the compute.

Must be caught by: the compute ban inside an allowed operator's body. Expected: torch_compute.
Workload: workloads/scale_add_host_op.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


@torch.library.custom_op("advhostop::scale_add_op", mutates_args=())
def scale_add_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    N = out.numel()
    _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
    out.copy_(2.0 * x + y)
    return out


@scale_add_op.register_fake
def _(x, y):
    return torch.empty_like(x)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.advhostop.scale_add_op(x, y)
