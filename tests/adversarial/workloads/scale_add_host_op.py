"""Adversarial-corpus workload: scale_add.py's (out = 2 * x + y on a 1D float32 tensor) for programs that wrap their
kernels in a PyTorch custom operator, as torchao's do, so the workload allows that operator on the host
(HOST_OPS). The operator's name is allowed; what its body computes is still the program's, judged like any forward.

A copy of scale_add.py's lines, not a read of that file: a confined candidate does not see the project's tree where
it lies under /tmp (a clean clone's CI: reading the file beside it raised FileNotFoundError in the compile gate).
"""

import torch

CASES = {
    "tiny": {"N": 1000, "dtype": "float32"},
    "bench": {"N": 1 << 26, "dtype": "float32"},
}

HOST_OPS = ("scale_add_op",)

DOMAIN = {"N": [1, 1 << 28], "dtype": ["float32"], "layout": ["contiguous"]}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return 2.0 * x + y


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.get("dtype", "float32"))
    x = torch.randn(case["N"], generator=g, dtype=torch.float32).to(dtype)
    y = torch.randn(case["N"], generator=g, dtype=torch.float32).to(dtype)
    return [x, y]


def get_inputs():
    return make_inputs(CASES["tiny"], 0)


def get_init_inputs():
    return []


def flops(case):
    return 2.0 * case["N"]


def bytes_moved(case):
    elem = torch.empty(0, dtype=getattr(torch, case.get("dtype", "float32"))).element_size()
    return float(3 * elem * case["N"])
