"""In-place scaled residual add, bf16: x += alpha * r for x and r of shape (M, N), alpha = 1/sqrt(2); x is updated
in place and returned (the output aliases input 0, declared in MUTATED_INPUTS).

Unsafe trap: @triton.autotune without restore_value=["x_ptr"] (family 10). The kernel reads and writes x, and the
autotuner benchmarks each config by launching it several times on the same x, so on the first call in a fresh
process x receives alpha * r once per launch made while tuning (a two-config variant failed the CPU check, x
about 3x off); later calls reuse the tuned config and look right. Also
(family 22): the output is x itself, so allocating a fresh output (undoing the in-place write) leaves x unchanged
and fails the mutated-input comparison.
"""

import math

import torch

ALPHA = 1.0 / math.sqrt(2.0)

CASES = {
    # 3 rows of 100: 300 elements in three 128-wide blocks, the last one masked.
    "tiny": {"M": 3, "N": 100, "dtype": "bfloat16"},
    # 8192 x 8192 bf16: x read and written (128 MiB each), r read (128 MiB).
    "bench": {"M": 8192, "N": 8192, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 65536],
    "N": [1, 16384],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}

MUTATED_INPUTS = (0,)

# The sum is formed in fp32 and rounded once to bf16; the interpreter truncates instead of rounding (one more ulp).
TOLERANCES = {"bfloat16": {"rtol": 3e-2, "atol": 1e-2, "norm": 1e-2}}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: x.add_(r, alpha=alpha), returning x (mutated the same way in float64)."""

    def __init__(self, alpha: float = ALPHA):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return x.add_(r, alpha=self.alpha)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    r = torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    return [x.to(_dtype(case)), r.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return [ALPHA]


def flops(case: dict) -> float:
    # one fused multiply-add per element.
    return 2.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x read and written, r read.
    return 3.0 * case["M"] * case["N"] * _dtype(case).itemsize
