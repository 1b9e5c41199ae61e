"""Attack (class 5, unbounded memory): asks for a 64 GiB output buffer (torch.empty: address space, no pages
touched, so the host is not hurt), then computes honestly in it. Today the child's address-space cap turns it into
a forward error.

Must be caught by: the candidate's memory limit, reported as such. Expected: oom. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        big = torch.empty(16 * 2**30, dtype=x.dtype, device=x.device)
        out = big[: x.numel()]
        N = x.numel()
        _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
