"""LayerNorm with weight and bias over the last dimension, fp32: y = (x - mean) / sqrt(var + eps) * w + b with the
biased variance and eps = 1e-5, for x of shape (M, N); w and b of shape (N,) are forward inputs.

Unsafe trap: one-pass statistics, var = E[x^2] - E[x]^2 (a tempting way to fuse the mean and variance loops into one
sweep of the row). It cancels catastrophically when |mean| >> std: the tiny case's rows have mean 50 and unit
spread, where fp32 E[x^2] ~ 2500 loses about 1e-4 of a variance of 1 (the output's relative error reaches 1.5e-4,
fifteen times the fp32 tolerance, where two passes stay at 3e-6). Two passes, or Welford's update (family 17), stay
correct.
"""

import torch

EPS = 1e-5

CASES = {
    # 4 rows of 200 (two 128-wide tiles, the second masked), offset by +50 so the mean dwarfs the spread.
    "tiny": {"M": 4, "N": 200, "dtype": "float32", "offset": 50.0},
    # 8192 tokens x 5120 features (not a power of two), fp32: 160 MiB read, 160 MiB written.
    "bench": {"M": 8192, "N": 5120, "dtype": "float32", "offset": 0.0},
}

DOMAIN = {
    "M": [1, 65536],
    "N": [1, 16384],
    "dtype": ["float32"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: torch.nn.functional.layer_norm (also runs in float64)."""

    def __init__(self, eps: float = EPS):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, self.eps)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32) + case["offset"]
    w = 1.0 + 0.1 * torch.randn(case["N"], generator=g, dtype=torch.float32)
    b = 0.1 * torch.randn(case["N"], generator=g, dtype=torch.float32)
    return [x.to(_dtype(case)), w.to(_dtype(case)), b.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return [EPS]


def flops(case: dict) -> float:
    # sum, subtract, square, sum, subtract, scale, multiply by w, add b: about eight operations per element.
    return 8.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once, w and b read once.
    return (2.0 * case["M"] * case["N"] + 2.0 * case["N"]) * _dtype(case).itemsize
