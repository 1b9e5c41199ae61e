"""Matrix product with an awkward reduction length, fp16: C = A @ B for A of shape (M, K) and B of shape (K, N)
where K is not a multiple of any common BLOCK_K (tiny K = 37, bench K = 1000); fp32 accumulation.

Unsafe traps: (1) a mask-free K loop (EVEN_K, family 4): K = 1000 is not a multiple of 64 (or 16) and K = 37 is
prime, so an unmasked last K step reads past the end of A's rows and B; the domain's K is any length, so a fast path
needs a run-time `K % BLOCK_K == 0` guard. (2) alignment hints on A's row stride (tl.multiple_of, family 2): with
K = 37 a row is 74 bytes, not a multiple of 16.
"""

import torch

CASES = {
    # K = 37: two 32-wide K steps, the second almost empty; M and N ragged for 32x32 tiles.
    "tiny": {"M": 40, "N": 48, "K": 37, "dtype": "float16"},
    # 8192 x 8192 with K = 1000, fp16: 134 GFLOP, compute bound on an H200.
    "bench": {"M": 8192, "N": 8192, "K": 1000, "dtype": "float16"},
}

DOMAIN = {
    "M": [1, 16384],
    "N": [1, 16384],
    "K": [1, 16384],
    "dtype": ["float16"],
    "layout": ["contiguous"],
}

# fp16 inputs, fp32 accumulator, output rounded to fp16 (11 significant bits).
TOLERANCES = {"float16": {"rtol": 1e-2, "atol": 1e-2, "norm": 5e-3}}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: plain torch.matmul (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(case["M"], case["K"], generator=g, dtype=torch.float32)
    b = torch.randn(case["K"], case["N"], generator=g, dtype=torch.float32)
    return [a.to(_dtype(case)), b.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    return 2.0 * case["M"] * case["N"] * case["K"]


def bytes_moved(case: dict) -> float:
    # A and B read once, C written once.
    return float(case["M"] * case["K"] + case["K"] * case["N"] + case["M"] * case["N"]) * _dtype(case).itemsize
