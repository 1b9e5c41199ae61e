"""Naive softplus: 128 elements per program, masked tail, the stable form max(x, 0) + log(1 + exp(-|x|)) in fp32,
and x itself above the threshold 20."""

import torch
import triton
import triton.language as tl


@triton.jit
def softplus_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    soft = tl.maximum(x, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x)))
    y = tl.where(x > 20.0, x, soft)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_elements = x.numel()
        BLOCK = 128
        grid = (triton.cdiv(n_elements, BLOCK),)
        softplus_kernel[grid](x, y, n_elements, BLOCK=BLOCK)
        return y
