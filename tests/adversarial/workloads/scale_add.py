"""Adversarial-corpus workload: elementwise out = 2 * x + y on a 1D float32 tensor.

The tiny case has 1000 elements, deliberately not a multiple of any power-of-two block size, so a
kernel must mask its last block (the unwritten-tail and out-of-bounds-store cheats rely on that).
"""

import torch

CASES = {
    "tiny": {"N": 1000, "dtype": "float32"},
    "bench": {"N": 1 << 26, "dtype": "float32"},
}

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
