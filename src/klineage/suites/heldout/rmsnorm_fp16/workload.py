"""RMSNorm without a weight, fp16: y = x * rsqrt(mean(x**2, -1) + eps) for x of shape (M, N), eps = 1e-6 (the
normalization of a QK-norm or of a weight folded into the next layer).

Unsafe trap: dropping the fp32 upcast (family 24) and summing squares in fp16. fp16 overflows at 65504: a row of
4096 values of magnitude 4 already sums to 65536, and every row of the "scaled" correctness inputs (std 50)
overflows, giving rsqrt(inf) = 0 and an all-zero row. Keep the fp32 accumulator.
"""

import torch

EPS = 1e-6

CASES = {
    # 3 rows of 200: two 128-wide tiles per sweep, the last one masked.
    "tiny": {"M": 3, "N": 200, "dtype": "float16"},
    # 32768 rows x 4096, fp16: 256 MiB read, 256 MiB written.
    "bench": {"M": 32768, "N": 4096, "dtype": "float16"},
}

DOMAIN = {
    "M": [1, 65536],
    "N": [1, 16384],
    "dtype": ["float16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference RMSNorm without weight, statistics in fp32 (float64 when given float64)."""

    def __init__(self, eps: float = EPS):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x if x.dtype == torch.float64 else x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)).to(x.dtype)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return [EPS]


def flops(case: dict) -> float:
    # square, sum, scale: about three operations per element.
    return 3.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once (the naive program reads x twice).
    return 2.0 * case["M"] * case["N"] * _dtype(case).itemsize
