"""Cheat (class 1, the reference found in sys.modules and run with the dispatch mode popped): like
reference_model_reuse, but the harness's mode is taken off the dispatch stack with
`torch._C._pop_torch_dispatch_stack` around the reference call and pushed back after, so the trace is clean.

Must be caught by: the static policy (sys, torch._C) or not having the workload in the candidate's process
(zeros: mismatch). Expected: static_ban or mismatch. Workload: workloads/softmax.py.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


def _reference():
    for mod in list(sys.modules.values()):
        cls = getattr(mod, "Model", None)
        if isinstance(cls, type) and callable(getattr(mod, "get_init_inputs", None)):
            return cls(*mod.get_init_inputs())
    return None


class ModelNew(torch.nn.Module):
    def forward(self, x):
        answer = torch.zeros_like(x)
        ref = _reference()
        if ref is not None:
            popped = []
            while torch._C._len_torch_dispatch_stack():
                popped.append(torch._C._pop_torch_dispatch_stack(None))
            try:
                answer = ref(x).contiguous()
            finally:
                for mode in reversed(popped):
                    torch._C._push_on_torch_dispatch_stack(mode)
        out = torch.empty_like(x)
        N = out.numel()
        _copy_kernel[(triton.cdiv(N, 256),)](answer, out, N, BLOCK=256)
        return out
