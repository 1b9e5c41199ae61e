"""Matrix product C = A @ B with A of shape (M, K) and B of shape (K, N), output in the input dtype.

KernelBench core (Model, get_inputs, get_init_inputs) plus the KLineage extensions.
"""

import torch

CASES = {
    # Sizes deliberately not multiples of 32 or of any tuned block, so every tile is ragged
    # (masked loads, wrapped offsets, masked stores). Runs under the Triton interpreter in well under a second.
    # fp16, because Triton 3.6's interpreter multiplies the raw bits of bf16 dot operands (see README.md).
    "tiny": {"M": 48, "N": 40, "K": 72, "dtype": "float16"},
    # Ragged M and N but K divisible by every BLOCK_K (64, 128): takes the EVEN_K (unmasked) K loop.
    # bf16 like the bench case; under the interpreter it needs the harness's bf16 tl.dot patch.
    "even_k": {"M": 48, "N": 40, "K": 256, "dtype": "bfloat16"},
    # N odd: B's and C's rows are 82 bytes apart, not a multiple of 16, so a tensor-descriptor (TMA) path cannot
    # take them and an expert's dispatch falls back to its pointer kernel; on an sm_90 GPU the other cases all take
    # TMA, and without this one the pointer kernel would never run there (nor be checked, nor mined).
    "unaligned": {"M": 48, "N": 41, "K": 72, "dtype": "float16"},
    # 8192^3 bf16: 1.1 TFLOP, compute bound on an H200.
    "bench": {"M": 8192, "N": 8192, "K": 8192, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 16384],
    "N": [1, 16384],
    "K": [1, 16384],
    "dtype": ["bfloat16", "float16"],
    "layout": ["contiguous"],
}

# Half-precision inputs with an fp32 accumulator: the products are exact in fp32 and the sum carries
# fp32 rounding, but the result is rounded to bf16 (8 significant bits) or fp16 (11 bits) on the store,
# so the output differs from the float64 reference by up to half an ulp of the output dtype.
TOLERANCES = {
    "bfloat16": {"rtol": 2e-2, "atol": 2e-2, "norm": 1e-2},
    "float16": {"rtol": 1e-2, "atol": 1e-2, "norm": 5e-3},
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: plain torch.matmul (works in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(case["M"], case["K"], generator=g, dtype=torch.float32)
    b = torch.randn(case["K"], case["N"], generator=g, dtype=torch.float32)
    return [a.to(_dtype(case)), b.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    return 2.0 * case["M"] * case["N"] * case["K"]


def bytes_moved(case: dict) -> float:
    # A and B read once, C written once.
    return float(case["M"] * case["K"] + case["K"] * case["N"] + case["M"] * case["N"]) * _dtype(case).itemsize
