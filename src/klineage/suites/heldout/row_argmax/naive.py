"""Naive row max/argmax: one program per row sweeps 128-wide tiles, takes each tile's maximum and its first index,
and replaces the running best only on a strictly larger value (so the first maximal index wins)."""

import torch
import triton
import triton.language as tl


@triton.jit
def row_argmax_kernel(x_ptr, values_ptr, indices_ptr, n_cols, x_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    best = -float("inf")
    best_index = 0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tile_max = tl.max(x, axis=0)
        tile_index = start + tl.argmax(x, axis=0, tie_break_left=True)
        better = tile_max > best
        best_index = tl.where(better, tile_index, best_index)
        best = tl.where(better, tile_max, best)
    tl.store(values_ptr + row, best.to(values_ptr.dtype.element_ty))
    tl.store(indices_ptr + row, best_index.to(tl.int64))


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        x2 = x.contiguous().view(-1, x.shape[-1])
        n_rows, n_cols = x2.shape
        values = torch.empty(n_rows, dtype=x.dtype, device=x.device)
        indices = torch.empty(n_rows, dtype=torch.int64, device=x.device)
        row_argmax_kernel[(n_rows,)](x2, values, indices, n_cols, x2.stride(0), BLOCK=128)
        return values.view(x.shape[:-1]), indices.view(x.shape[:-1])
