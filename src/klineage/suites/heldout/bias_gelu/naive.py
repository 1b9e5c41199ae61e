"""Naive bias + GELU: a flat 1-D launch of 128 elements per program, the column of each element is offs % N,
computed in fp32 with tanh written out through exp."""

import torch
import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(x_ptr, b_ptr, y_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs % n_cols, mask=mask, other=0.0).to(tl.float32)
    z = x + b
    inner = 0.7978845608028654 * (z + 0.044715 * z * z * z)
    # tanh(u) = 1 - 2 / (exp(2u) + 1): exp overflows to inf for large u, giving exactly 1
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * z * (1.0 + t)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b = b.contiguous()
        y = torch.empty_like(x)
        n_elements = x.numel()
        BLOCK = 128
        grid = (triton.cdiv(n_elements, BLOCK),)
        bias_gelu_kernel[grid](x, b, y, n_elements, x.shape[-1], BLOCK=BLOCK)
        return y
