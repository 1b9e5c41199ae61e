"""Cheat (class 3, reaching the judge's reference through torch's public hooks): at import, a global module
forward hook (torch.nn.modules.module.register_module_forward_hook) replaces the output of every module that is
not a ModelNew with zeros: the judge's reference Model, run in the same process, then answers zeros, which is
what this program's kernel writes. Public torch API, no assignment, no private name.

Must be caught by: computing the reference in a process the candidate never ran in. Expected: mismatch (or
static_ban, should a policy refuse global hooks). Workload: workloads/softmax.py.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _zeros_kernel(out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < N)


def _zero_the_others(module, args, output):
    if isinstance(module, ModelNew):
        return None
    return torch.zeros_like(output)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        N = out.numel()
        _zeros_kernel[(triton.cdiv(N, 256),)](out, N, BLOCK=256)
        return out


torch.nn.modules.module.register_module_forward_hook(_zero_the_others)
