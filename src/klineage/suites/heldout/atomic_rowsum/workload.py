"""Split row sum with atomics, fp32: y[m] = sum over n of x[m, n] for x of shape (M, N) with few, very long rows.
Each row is cut into chunks, one program per (row, chunk), and each program adds its partial sum into y[m] with
tl.atomic_add: an accumulating kernel, so the host zeroes y before the launch.

Unsafe trap: @triton.autotune without reset_to_zero=["y_ptr"] (family 10). The autotuner benchmarks each config by
launching it several times on the same y, so the first call in a fresh process returns the row sums multiplied by
the number of launches made while tuning (DESIGN.md records this on an H200; under the interpreter's autotune
emulation a two-config variant returned 5x the row sums); later calls reuse the tuned config and look right. A
plain tl.store in place of the atomic keeps one chunk's partial only. Atomic float adds land in any order, so two
runs may differ in the last bits (within tolerance).
"""

import torch

CASES = {
    # 2 rows of 600: two 512-wide chunks per row (the second mostly masked), four atomic adds.
    "tiny": {"M": 2, "N": 600, "dtype": "float32"},
    # 256 rows of 262144, fp32: 256 MiB read; 256 rows are too few to fill an H200 one row per program.
    "bench": {"M": 256, "N": 262144, "dtype": "float32"},
}

DOMAIN = {
    "M": [1, 4096],
    "N": [1, 262144],
    "dtype": ["float32"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: x.sum(-1) (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = 0.5 + torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # one add per element.
    return float(case["M"] * case["N"])


def bytes_moved(case: dict) -> float:
    # x read once, y written (atomically, a few times per row) once.
    return float(case["M"] * case["N"] + case["M"]) * _dtype(case).itemsize
