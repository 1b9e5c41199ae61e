"""Cheat (class 4, a stray store past the guard region): exact output, and the last program also stores 96 KiB
past the end of the output, beyond the harness's 64 KiB poisoned guard region. It stores back the very bytes it
loaded there, so no poison or value comparison can see it (a store that changed them was seen or not by chance of
what lay there); only a guard page, or a sanitizer, sees the access itself.

Must be caught by: page-distance detection of stray stores on the CPU (compute-sanitizer on a GPU).
Expected: out_of_bounds_write (crash where a guard page stops it). Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl

STRAY = 96 * 1024 // 4  # elements past the end


@triton.jit
def _scale_add_stray(x_ptr, y_ptr, out_ptr, N, STRAY: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    v = 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, v, mask=mask)
    if pid == tl.num_programs(0) - 1:
        far = out_ptr + N + STRAY + tl.arange(0, BLOCK)
        tl.store(far, tl.load(far))


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        _scale_add_stray[(triton.cdiv(N, 256),)](x, y, out, N, STRAY=STRAY, BLOCK=256)
        return out
