"""A Triton program for KernelBench level 1's 92_cumsum_exclusive (along dim 1 of a (B, N) tensor), written here:
one program per row, a running carry over blocks, each block's inclusive scan less its own elements."""

import torch
import triton
import triton.language as tl


@triton.jit
def exclusive_cumsum_rows(x_ptr, y_ptr, N, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    carry = tl.zeros((), dtype=tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < N
        x = tl.load(x_ptr + row * sx + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * sy + offs, carry + tl.cumsum(x, axis=0) - x, mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        assert dim == 1, "rows only"
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, N = x.shape
        y = torch.empty_like(x)
        exclusive_cumsum_rows[(rows,)](x, y, N, x.stride(0), y.stride(0), BLOCK=1024)
        return y
