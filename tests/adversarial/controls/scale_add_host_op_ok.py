"""Control: the honest twin of programs/host_op_body_compute.py. Its custom operator (allowed by the workload's
HOST_OPS) allocates the output and computes it with one kernel, as torchao's operators do: a guard that watches
the operator's body must still pass it."""

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


@torch.library.custom_op("advhostopok::scale_add_op", mutates_args=())
def scale_add_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    N = out.numel()
    _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
    return out


@scale_add_op.register_fake
def _(x, y):
    return torch.empty_like(x)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.advhostopok.scale_add_op(x, y)
