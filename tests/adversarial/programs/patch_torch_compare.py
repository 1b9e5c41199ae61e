"""Cheat (class 3, patching torch under the judge): at import, `torch.Tensor.any` is made to say False and
`torch.Tensor.norm` to say 0, and `torch.equal` to say True: the judge's comparison (NaN masks, "any element beyond
tolerance", the error norm, bitwise checks) then finds nothing wrong with an output of zeros written by a kernel.

Must be caught by: comparing in a process the candidate cannot touch. Expected: static_ban or mismatch.
Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl

torch.Tensor.any = lambda self, *a, **k: torch.zeros((), dtype=torch.bool)
torch.Tensor.norm = lambda self, *a, **k: torch.zeros((), dtype=torch.float64)
torch.equal = lambda a, b: True


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        return out
