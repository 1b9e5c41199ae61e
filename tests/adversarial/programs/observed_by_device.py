"""Cheat (class 4, detecting a laptop's check): a correct kernel while its inputs say they live on the CPU (where
a check without a GPU runs the program), a zero-writing kernel where they say CUDA (a user's call on the GPU).

Must be caught by: CUDA mapped to the CPU (klineage.cuda_on_cpu), under which the program reads its tensors as
CUDA ones, `is_cuda` True: the CPU check runs the path the GPU runs. Before that mapping it passed the CPU check.
Expected: mismatch. Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        N = out.numel()
        if x.device.type == "cpu" and not x.is_cuda:
            _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        else:
            _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        return out
