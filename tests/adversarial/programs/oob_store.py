"""Cheat: out-of-bounds store -- to drop the masks, loads wrap around (offs % N, always in bounds) and the
store is unmasked, so the last block writes up to BLOCK - 1 elements past the end of the output (24 floats
for N = 1000, BLOCK = 256). The values inside the output are all correct; the extra values are real,
non-zero numbers (2 * x + y of wrapped elements), so they overwrite whatever follows the output in memory.

Guard that must catch it: guard regions that start exactly at the output's logical end (poison after the
output, checked after the call). On a GPU the 96-byte spill stays inside the caching allocator's 512-byte
rounding of the 4000-byte block, so neither the allocator nor compute-sanitizer notices it by itself.
Expected code: out_of_bounds_write.
Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_nomask_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = offs % N  # in-bounds loads without a mask
    x = tl.load(x_ptr + src)
    y = tl.load(y_ptr + src)
    tl.store(out_ptr + offs, 2.0 * x + y)  # no mask: last block spills past the end


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        N = x.numel()
        _scale_add_nomask_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
