"""Naive in-place residual add: 128 elements per program, each element of x read, updated in fp32 and written back
to the same address; returns x itself."""

import torch
import triton
import triton.language as tl


@triton.jit
def residual_add_kernel(x_ptr, r_ptr, n_elements, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + offs, (x + alpha * r).to(x_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, alpha: float = 0.7071067811865476):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        assert x.is_contiguous() and r.is_contiguous(), "in place on a contiguous x only"
        n_elements = x.numel()
        BLOCK = 128
        grid = (triton.cdiv(n_elements, BLOCK),)
        residual_add_kernel[grid](x, r, n_elements, self.alpha, BLOCK=BLOCK)
        return x
