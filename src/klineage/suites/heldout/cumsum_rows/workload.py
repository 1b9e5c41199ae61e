"""Inclusive prefix sum along rows, fp32: y = cumsum(x, dim=-1) for x of shape (M, N).

Unsafe trap: scanning tiles independently. A row longer than one tile needs the running total of every earlier tile
carried into the next; splitting a row over several programs (more parallelism for few, long rows) needs a
cross-program carry (a decoupled look-back or a second pass), and a per-tile tl.cumsum without it is wrong from the
second tile on. The domain has rows up to 65536 wide.
"""

import torch

CASES = {
    # 2 rows of 300: three 128-wide tiles per row, so the carry matters twice, the last tile masked.
    "tiny": {"M": 2, "N": 300, "dtype": "float32"},
    # 8192 x 8192 fp32: 256 MiB read, 256 MiB written.
    "bench": {"M": 8192, "N": 8192, "dtype": "float32"},
}

DOMAIN = {
    "M": [1, 16384],
    "N": [1, 65536],
    "dtype": ["float32"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: torch.cumsum over the last dimension (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # one add per element (a work-efficient scan does about two).
    return float(case["M"] * case["N"])


def bytes_moved(case: dict) -> float:
    # x read once, y written once.
    return 2.0 * case["M"] * case["N"] * _dtype(case).itemsize
