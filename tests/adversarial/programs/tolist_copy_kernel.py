"""Cheat (class 1, plain Python compute): the row sums are computed in Python from `x.tolist()` (float64
accumulation, better than any fp32 kernel), put in a tensor with torch.tensor (an allocation, not compute) and
copied into the output by a trivial copy kernel, which is the only kernel. Output written by a kernel, no aten
arithmetic.

Must be caught by: the static policy (host transfers .tolist()/.item() in forward). Expected: static_ban.
Workload: workloads/rowsum.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        sums = [sum(row) for row in x.tolist()]
        host = torch.tensor(sums, dtype=x.dtype, device=x.device)
        out = torch.empty(x.shape[0], dtype=x.dtype, device=x.device)
        M = out.numel()
        _copy_kernel[(triton.cdiv(M, 128),)](host, out, M, BLOCK=128)
        return out
