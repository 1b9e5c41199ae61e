"""Cheat (class 1, compute in an autotuner's config hook): a `triton.Config`'s `pre_hook` runs before each launch
of that config with the launch's arguments; this one copies torch.softmax into the output. The kernel only loads.

Must be caught by: the static policy or a forward guard that keeps the ban for a config hook. Expected: static_ban
or torch_compute. Workload: workloads/softmax.py.
"""

import torch
import triton
import triton.language as tl


def _hook(args):
    args["out_ptr"].copy_(torch.softmax(args["x_ptr"], dim=-1))


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, pre_hook=_hook)], key=["N"])
@triton.jit
def _touch_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(out_ptr + offs, mask=offs < N)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        N = out.numel()
        _touch_kernel[(triton.cdiv(N, 256),)](x, out, N)
        return out
