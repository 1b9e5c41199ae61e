"""Cheat: an autotune list with a config that is wrong where it would win. The one-tile softmax reads BLOCK
columns; the first config's 1024 covers every row of the tiny and wide cases, the second's 64 covers only the tiny
case's 37. On a GPU the autotuner picks by time, and the 64-wide tile, which reads a fraction of a wide row, is
the faster: the timed program is the wrong one. A gate that checks whichever config its own benchmark chose
passed such a list (memory's remembered autotune list on the naive softmax, x1.87 with half the bench case's
rows wrong; H200, run 20); on the CPU, where the emulated benchmark takes the first config, it passes every time.

Guard that must catch it: every config of an autotuner checked on every named case (gates.AutotunePicks).
Expected code: unwritten_output (the poisoned output's columns past the tile), or mismatch. Workload:
workloads/softmax.py, case "wide" (N = 700).
"""

import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}), triton.Config({"BLOCK": 64})], key=["N"])
@triton.jit
def _softmax_kernel(x_ptr, out_ptr, N, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(out_ptr + row * stride_row + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty_like(x)
        _softmax_kernel[(M,)](x, out, N, x.stride(0))
        return out
