"""Control (must PASS): an honest autotuned float32 row softmax for workloads/softmax.py.

Online softmax over column tiles: every config (tile width and warps) covers any row length, so whichever the
autotuner picks is right. The gate checks each config on every named case (gates.AutotunePicks); an honest list
passes.
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}, num_warps=1), triton.Config({"BLOCK": 256}, num_warps=4),
             triton.Config({"BLOCK": 32}, num_warps=2)],
    key=["N"],
)  # fmt: skip
@triton.jit
def _softmax_kernel(x_ptr, out_ptr, N, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    d = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        x = tl.load(x_ptr + row * stride_row + start + cols, mask=mask, other=-float("inf"))
        m_new = tl.maximum(m, x)
        d = d * tl.exp(m - m_new) + tl.where(mask, tl.exp(x - m_new), 0.0)
        d = tl.where(m_new == -float("inf"), 0.0, d)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == -float("inf"), 0.0, d * tl.exp(m - row_max)), axis=0)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        x = tl.load(x_ptr + row * stride_row + start + cols, mask=mask, other=-float("inf"))
        tl.store(out_ptr + row * stride_row + start + cols, tl.exp(x - row_max) / total, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty_like(x)
        _softmax_kernel[(M,)](x, out, N, x.stride(0))
        return out
