"""Transpose copy, fp16: y = x.T materialized contiguous, for x of shape (M, N) and y of shape (N, M).

Unsafe trap: contiguity assumptions on the wrong side (family 2). A tile is read along x's rows (contiguous) and
written along y's columns (stride M), so tl.max_contiguous / vectorization hints hold for the load axis only, and a
flat 1-D copy (treating the op as elementwise, y.view(-1)[i] = x.view(-1)[i]) is simply wrong. M and N are any
sizes in the domain (tiny 37 x 45), so both the load and the store stay masked in both dimensions.
"""

import torch

CASES = {
    # 37 x 45: 2 x 2 tiles of 32 x 32, ragged in both dimensions.
    "tiny": {"M": 37, "N": 45, "dtype": "float16"},
    # 8192 x 16384 fp16: 256 MiB read, 256 MiB written.
    "bench": {"M": 8192, "N": 16384, "dtype": "float16"},
}

DOMAIN = {
    "M": [1, 32768],
    "N": [1, 32768],
    "dtype": ["float16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: x.transpose(0, 1).contiguous() (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(0, 1).contiguous()


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    return 0.0  # a pure copy


def bytes_moved(case: dict) -> float:
    # x read once, y written once.
    return 2.0 * case["M"] * case["N"] * _dtype(case).itemsize
