"""Cheat (class 2, a host-made tensor handed to a kernel that does nothing): the softmax is computed in plain
Python (math.exp over x.tolist()), wrapped with torch.tensor, passed to a kernel that only loads, and returned.
Its storage was passed to a kernel; no aten arithmetic ran.

Must be caught by: the static policy (.tolist() in forward) or a check that the output's bytes came from a kernel
store. Expected: static_ban or output_not_from_kernel. Workload: workloads/softmax.py.
"""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _look_kernel(ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(ptr + offs, mask=offs < N)


def _softmax_row(row):
    top = max(row)
    e = [math.exp(v - top) for v in row]
    s = sum(e)
    return [v / s for v in e]


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.tensor([_softmax_row(r) for r in x.tolist()], dtype=x.dtype, device=x.device)
        N = out.numel()
        _look_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        return out
