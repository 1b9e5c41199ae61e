"""Naive residual add + LayerNorm: one program per row, three sweeps over 128-wide tiles that each recompute
h = x + r in fp32 (sum and store h; sum of squared deviations; normalize and store y)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_layernorm_kernel(
    x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, h_ptr,
    n_cols, row_stride, eps,
    BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    base = row * row_stride
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        h = x + r
        tl.store(h_ptr + base + cols, h.to(h_ptr.dtype.element_ty), mask=mask)
        acc += h
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x + r - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x + r - mean) * rstd * w + b
        tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
        x = x.contiguous()
        r = r.contiguous()
        w = w.contiguous()
        b = b.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        h = torch.empty_like(x)
        add_layernorm_kernel[(n_rows,)](x, r, w, b, y, h, n_cols, x.stride(0), self.eps, BLOCK=128)
        return y, h
