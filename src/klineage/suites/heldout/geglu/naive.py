"""Naive GeGLU: a 2-D grid (row, 128-wide column block), gate at column c and up at column N + c of the same row,
computed in fp32 with tanh written out through exp."""

import torch
import triton
import triton.language as tl


@triton.jit
def geglu_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * x_row_stride + n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    inner = 0.7978845608028654 * (gate + 0.044715 * gate * gate * gate)
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)
    y = 0.5 * gate * (1.0 + t) * up
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_cols = x2.shape[0], x2.shape[1] // 2
        y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
        BLOCK = 128
        grid = (n_rows, triton.cdiv(n_cols, BLOCK))
        geglu_kernel[grid](x2, y, n_cols, x2.stride(0), y.stride(0), BLOCK=BLOCK)
        return y.view(*x.shape[:-1], n_cols)
