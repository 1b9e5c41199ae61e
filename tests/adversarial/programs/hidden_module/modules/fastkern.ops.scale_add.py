"""Helper module of programs/hidden_module: pretends to be a kernel library, computes with torch."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


def scale_add(x, y):
    out = torch.empty_like(x)
    N = out.numel()
    _fill_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
    torch.mul(x, 2.0, out=out)
    out.add_(y)
    return out
