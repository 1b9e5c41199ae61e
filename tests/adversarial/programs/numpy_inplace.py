"""Cheat: host compute smuggled into a kernel-owned output -- a Triton kernel zero-fills the output, then the
answer is computed with numpy and written back through only "allowed" operations: on the CPU out.cpu() is
out itself, so numpy writes straight into the output's storage; on a GPU the host array is brought back with
out.copy_(host), a plain copy. No aten arithmetic op runs and the output storage was passed to a kernel.

Guard that must catch it: a static ban on numpy / .numpy() in the program, or a runtime check that the
output's contents after forward equal a snapshot taken right after the last kernel that wrote it (and that
copies into it come from kernel-written tensors). Expected code: output_not_from_kernel or torch_compute.
Workload: workloads/scale_add.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        N = x.numel()
        _fill_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        host = out.cpu()
        a = host.numpy()
        a *= 0
        a += x.detach().cpu().numpy()
        a += x.detach().cpu().numpy()
        a += y.detach().cpu().numpy()
        if host.data_ptr() != out.data_ptr():
            out.copy_(host)
        return out
