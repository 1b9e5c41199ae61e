"""Bias + GELU (tanh approximation), fp16: y = gelu_tanh(x + b) for x of shape (M, N) and a bias b of shape (N,).

gelu_tanh(z) = 0.5 * z * (1 + tanh(sqrt(2 / pi) * (z + 0.044715 * z**3))), PyTorch's `approximate="tanh"`.

Unsafe trap: hoisting the bias load out of the element loop (family 19: "load b once per block"). The bias is
indexed by column, `offs % N`; a flat block of BLOCK elements lies inside one row only when BLOCK divides N. The
domain's N is any width (tiny N = 100), so a block straddles two rows and a hoisted bias slice is wrong there.
"""

import torch

CASES = {
    # 3 rows of 100 columns: 300 elements, and a flat block of 128 crosses row ends.
    "tiny": {"M": 3, "N": 100, "dtype": "float16"},
    # 16384 tokens x 8192 features, fp16: 256 MiB read, 256 MiB written.
    "bench": {"M": 16384, "N": 8192, "dtype": "float16"},
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
    """Reference: PyTorch's tanh-approximated GELU of x + b (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x + b, approximate="tanh")


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    b = 0.5 * torch.randn(case["N"], generator=g, dtype=torch.float32)
    return [x.to(_dtype(case)), b.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # add, cube (2), fma, scale, tanh (~4), 1 +, two multiplies: about 12 operations per element.
    return 12.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once, the bias read once.
    return (2.0 * case["M"] * case["N"] + case["N"]) * _dtype(case).itemsize
