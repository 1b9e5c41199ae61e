"""Scaled, masked softmax of attention scores, fp16: y = softmax(x * scale + mask, dim=-1) for scores x of shape
(B, H, S, S) and an additive fp32 mask of shape (S, S) broadcast over batch and heads; scale = 1/8 (head dim 64).

Unsafe trap: skipping the masked part of the row (family 16: "the upper triangle is -inf, do not load it"). The
mask is an arbitrary additive tensor, not a causal pattern: the tiny case's mask is causal (-inf above the
diagonal), but the fresh seeds draw it from the same distributions as x, with no -inf anywhere. A row whose mask is
entirely -inf must come out NaN, as the reference does (DOMAIN fully_masked_rows), not as zeros. Also: B*H*S*S
reaches 2^39 in the domain, so the row offsets are int64.
"""

import torch

SCALE = 0.125

CASES = {
    # 2 heads of 12 x 12 scores: 24 rows, each a masked 16-wide block.
    "tiny": {"B": 1, "H": 2, "S": 12, "dtype": "float16"},
    # 8 x 16 heads of 1024 x 1024 scores, fp16: 256 MiB read, 256 MiB written (plus a 4 MiB mask).
    "bench": {"B": 8, "H": 16, "S": 1024, "dtype": "float16"},
}

DOMAIN = {
    "B": [1, 64],
    "H": [1, 128],
    "S": [1, 8192],
    "dtype": ["float16"],
    "layout": ["contiguous"],
    "fully_masked_rows": True,
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: softmax of the scaled scores plus the mask, computed in the mask's precision (fp32, or float64)."""

    def __init__(self, scale: float = SCALE):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        z = x.to(mask.dtype) * self.scale + mask
        return torch.softmax(z, dim=-1).to(x.dtype)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    S = case["S"]
    x = 4.0 * torch.randn(case["B"], case["H"], S, S, generator=g, dtype=_dtype(case))
    mask = torch.full((S, S), float("-inf")).triu(1)  # causal: key j > query i is masked
    return [x.to(_dtype(case)), mask]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return [SCALE]


def flops(case: dict) -> float:
    # scale, add mask, max, subtract, exp, sum, divide: about seven operations per score.
    return 7.0 * case["B"] * case["H"] * case["S"] * case["S"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once, the fp32 mask read once.
    scores = case["B"] * case["H"] * case["S"] * case["S"]
    return 2.0 * scores * _dtype(case).itemsize + 4.0 * case["S"] * case["S"]
