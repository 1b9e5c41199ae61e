"""Linear layer with a ReLU epilogue, bf16: C = relu(A @ B + bias) for A of shape (M, K), B of shape (K, N) and a
bias of shape (N,) broadcast over rows; fp32 accumulation, one rounding to bf16 at the end.

Unsafe trap: split-K (family 14) that accumulates activated partial tiles. relu is not additive,
relu(a1 + a2) != relu(a1) + relu(a2), so the partial products over K must be reduced before the bias add and the
activation; an atomic split-K into C that applies the epilogue per split is wrong (and C would need zeroing). The
tiny case's K = 72 is also not a multiple of 64: a mask-free K loop (EVEN_K, family 4) needs a guard.
"""

import torch

CASES = {
    # Ragged in every dimension for 32-wide tiles: 2 x 2 output tiles, three K steps with a masked last one.
    "tiny": {"M": 40, "N": 48, "K": 72, "dtype": "bfloat16"},
    # 4096^3 bf16: 137 GFLOP, compute bound on an H200.
    "bench": {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 16384],
    "N": [1, 16384],
    "K": [1, 16384],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}

# bf16 inputs, fp32 accumulator, output rounded to bf16 (half an ulp, 2^-9 relative).
TOLERANCES = {"bfloat16": {"rtol": 2e-2, "atol": 2e-2, "norm": 1e-2}}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: relu(a @ b + bias) (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(a, b) + bias)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(case["M"], case["K"], generator=g, dtype=torch.float32)
    b = torch.randn(case["K"], case["N"], generator=g, dtype=torch.float32)
    bias = torch.randn(case["N"], generator=g, dtype=torch.float32)
    return [a.to(_dtype(case)), b.to(_dtype(case)), bias.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # the product, plus a bias add and a max per output element.
    return 2.0 * case["M"] * case["N"] * case["K"] + 2.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # A, B and the bias read once, C written once.
    elements = case["M"] * case["K"] + case["K"] * case["N"] + case["N"] + case["M"] * case["N"]
    return float(elements) * _dtype(case).itemsize
