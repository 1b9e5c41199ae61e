"""Adversarial-corpus workload: row softmax of a 2D float32 tensor (softmax over the last dim).

The tiny case is 6 x 37: the row length is not a power of two, so kernels must mask the padded lanes
with -inf. The "wide" case is a held-out shape (N > 64) for shape-overfitting cheats. make_inputs draws
logits with standard deviation 3 (attention-like scale), where an fp16 computation is off by a few 1e-4.
"""

import torch

CASES = {
    "tiny": {"M": 6, "N": 37, "dtype": "float32"},
    "wide": {"M": 3, "N": 700, "dtype": "float32"},
    "bench": {"M": 16384, "N": 4096, "dtype": "float32"},
}

DOMAIN = {"M": [1, 65536], "N": [1, 16384], "dtype": ["float32"], "layout": ["contiguous"]}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.get("dtype", "float32"))
    x = (3.0 * torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)).to(dtype)
    return [x]


def get_inputs():
    return make_inputs(CASES["tiny"], 0)


def get_init_inputs():
    return []


def flops(case):
    # max, subtract, exp, sum, divide: about 5 operations per element
    return 5.0 * case["M"] * case["N"]


def bytes_moved(case):
    elem = torch.empty(0, dtype=getattr(torch, case.get("dtype", "float32"))).element_size()
    return float(2 * elem * case["M"] * case["N"])
