"""Softplus over a vector whose length no power-of-two block divides, fp32: y = softplus(x) = log(1 + exp(x)), with
PyTorch's default threshold (y = x where x > 20), for x of shape (N,) with N odd: 389, 1000003 and 100000007.

Unsafe trap: anything that assumes N is a multiple of the block (family 4's "EVEN_N" mask-free path, tl.multiple_of
or tl.max_contiguous hints on the tail, or a launcher that rounds N up to a multiple of BLOCK and pads): no
power-of-two block divides an odd N, so the last block is always partial and its loads and stores stay masked.
"""

import torch

CASES = {
    # N = 389, a prime: four 128-wide blocks, the last one holding 5 elements.
    "tiny": {"N": 389, "dtype": "float32"},
    # N = 1000003, a prime: checked on a GPU only (7813 programs are too many for the interpreter).
    "prime": {"N": 1000003, "dtype": "float32", "device": "cuda"},
    # N = 100000007 fp32: 400 MB read, 400 MB written.
    "bench": {"N": 100000007, "dtype": "float32"},
}

DOMAIN = {
    "N": [1, 2**30],
    "dtype": ["float32"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: torch.nn.functional.softplus (beta 1, threshold 20; also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = 8.0 * torch.randn(case["N"], generator=g, dtype=torch.float32)  # both sides of the threshold
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # abs, exp, add, log, max, add, compare/select: about seven operations per element.
    return 7.0 * case["N"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once.
    return 2.0 * case["N"] * _dtype(case).itemsize
