"""Adversarial-corpus workload: sum over the last dim of a 2D float32 tensor.

out[m] = sum_n x[m, n]  ->  shape (M,)

Inputs are drawn uniform in [0, 1) by make_inputs, which is exactly the distribution under which the
"closed-form expectation" (n * 0.5) and "strided subsample" (4 * sum of every 4th element) hacks look
right to within about 1% on the "large" case. The harness redraws inputs from its own distributions
(normal, heavy-tailed, signed, scaled), which is what must expose those hacks.
"""

import torch

CASES = {
    "tiny": {"M": 8, "N": 300, "dtype": "float32"},
    # A long reduction: the regime where closed-form / subsample hacks pass a loose tolerance.
    "large": {"M": 4, "N": 20000, "dtype": "float32"},
    "bench": {"M": 8192, "N": 8192, "dtype": "float32"},
}

DOMAIN = {"M": [1, 65536], "N": [1, 65536], "dtype": ["float32"], "layout": ["contiguous"]}


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=-1)


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case.get("dtype", "float32"))
    x = torch.rand(case["M"], case["N"], generator=g, dtype=torch.float32).to(dtype)
    return [x]


def get_inputs():
    return make_inputs(CASES["tiny"], 0)


def get_init_inputs():
    return []


def flops(case):
    return float(case["M"] * case["N"])


def bytes_moved(case):
    elem = torch.empty(0, dtype=getattr(torch, case.get("dtype", "float32"))).element_size()
    return float(elem * (case["M"] * case["N"] + case["M"]))
