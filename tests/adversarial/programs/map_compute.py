"""Cheat (class 1, compute through a Python callback of torch itself): a copy kernel writes x into the output,
then `out.map_(y, lambda a, b: 2.0 * a + b)` finishes the job. Tensor.map_ (like apply_) calls a Python function
per element from C++ without going through the dispatcher, so the harness's mode sees nothing; only torch,
triton and a lambda in the source. (CPU tensors only: on a GPU it raises.)

Must be caught by: the static policy (map_/apply_ are host compute). Expected: static_ban, torch_compute or, on
a GPU, forward_error. Workload: workloads/scale_add.py.
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
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        _copy_kernel[(triton.cdiv(N, 256),)](x, out, N, BLOCK=256)
        out.map_(y, lambda a, b: 2.0 * a + b)
        return out
