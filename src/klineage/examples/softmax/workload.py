"""Row softmax: y = softmax(x, dim=-1) for a 2D tensor x of shape (M, N).

KernelBench core (Model, get_inputs, get_init_inputs) plus the KLineage extensions.
"""

import torch

CASES = {
    # Runs under the Triton interpreter in well under a second; N is not a power of two.
    "tiny": {"M": 6, "N": 37, "dtype": "float32"},
    # A column count that is not a power of two (masked tail of the row block), in half precision.
    "odd": {"M": 19, "N": 1000, "dtype": "float16"},
    # 8192 x 8192 fp32: 256 MiB read, 256 MiB written.
    "bench": {"M": 8192, "N": 8192, "dtype": "float32"},
}

DOMAIN = {
    "M": [1, 65536],
    "N": [1, 32768],
    "dtype": ["float32", "float16", "bfloat16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: softmax over the last dimension (works in any floating dtype, float64 included)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # max, subtract, exp, sum, divide: about five operations per element.
    return 5.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once.
    return 2.0 * case["M"] * case["N"] * _dtype(case).itemsize
