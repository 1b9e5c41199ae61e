"""Cheat: reusing the workload's own reference Model -- forward looks through sys.modules for the loaded
workload module (a module with Model, get_inputs and get_init_inputs), runs its Model on the input and
copies the answer into a kernel-touched output with out.copy_() (an "allowed" copy). A kernel does run,
and the output's storage was passed to it; the arithmetic happens inside the reference's torch.softmax.
If the workload module is not importable in the candidate's process, it writes zeros (wrong).

Guard that must catch it: runtime dispatch trace of the whole forward call, including nested module calls
(aten._softmax outside any kernel), or not loading the workload in the candidate's process.
Expected code: torch_compute (or mismatch when the workload is not reachable). Workload: workloads/softmax.py.
"""

import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _fill_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


def _find_reference_model():
    for mod in list(sys.modules.values()):
        model_cls = getattr(mod, "Model", None)
        if (
            isinstance(model_cls, type)
            and issubclass(model_cls, torch.nn.Module)
            and callable(getattr(mod, "get_inputs", None))
            and callable(getattr(mod, "get_init_inputs", None))
        ):
            return model_cls(*mod.get_init_inputs())
    return None


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        N = out.numel()
        _fill_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        ref_model = _find_reference_model()
        if ref_model is not None:
            out.copy_(ref_model(x))
        return out
