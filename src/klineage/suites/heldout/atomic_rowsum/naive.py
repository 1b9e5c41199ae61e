"""Naive split row sum: one program per (row, 512-element chunk) sums its chunk in 128-wide tiles and adds the
partial into y[row] with tl.atomic_add; the host allocates y zeroed."""

import torch
import triton
import triton.language as tl


@triton.jit
def split_rowsum_kernel(x_ptr, y_ptr, n_cols, x_row_stride, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk_start = tl.program_id(1) * CHUNK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, CHUNK, BLOCK):
        cols = chunk_start + start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.atomic_add(y_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_cols = x2.shape
        y = torch.zeros(n_rows, dtype=torch.float32, device=x.device)
        CHUNK, BLOCK = 512, 128
        grid = (n_rows, triton.cdiv(n_cols, CHUNK))
        split_rowsum_kernel[grid](x2, y, n_cols, x2.stride(0), CHUNK=CHUNK, BLOCK=BLOCK)
        return y.view(x.shape[:-1])
