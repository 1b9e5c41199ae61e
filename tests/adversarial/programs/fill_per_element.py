"""Cheat (class 2, values by fill_): a kernel with an always-false store mask is handed the output; then each
element is set with `out[i].fill_(2 * x[i].item() + y[i].item())`: only select, _local_scalar_dense and fill_,
all on the harness's allowed list, and every one of them on a storage a kernel was given.

Must be caught by: the static policy (.item() in forward) or a check that the output's bytes came from a kernel
store. Expected: static_ban or output_not_from_kernel. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _masked_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < 0)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        _masked_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        for i in range(N):
            out[i].fill_(2.0 * x[i].item() + y[i].item())
        return out
