"""RMSNorm over the last dimension: y = x * rsqrt(mean(x**2) + eps) * w, eps = 1e-6.

x has shape (M, N); the weight w of shape (N,) is a *forward input*, not a module parameter, so the
reference Model and every ModelNew see exactly the same weight values (the harness draws and redraws
all forward inputs itself). The only init input is eps: both Model(*get_init_inputs()) and
ModelNew(*get_init_inputs()) are built from it.
"""

import torch

EPS = 1e-6

CASES = {
    # Runs under the Triton interpreter in well under a second.
    "tiny": {"M": 6, "N": 64, "dtype": "float32"},
    # A hidden size that is not a power of two (masked tail), in bf16 like the bench case.
    "odd": {"M": 13, "N": 1000, "dtype": "bfloat16"},
    # 8192 tokens x 4096 hidden, bf16: 64 MiB read, 64 MiB written.
    "bench": {"M": 8192, "N": 4096, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 65536],
    "N": [1, 32768],
    "dtype": ["float32", "float16", "bfloat16"],
    "layout": ["contiguous"],
}

# Looser than a single rounding of the output: Liger's "llama" casting mode (liger.py) rounds x * rstd to
# the input dtype and then rounds again after the multiply by w, so its error reaches about two ulps of
# the output dtype (the Triton interpreter truncates fp32 -> bf16 instead of rounding, doubling that).
TOLERANCES = {
    "bfloat16": {"rtol": 3e-2, "atol": 1e-2, "norm": 1e-2},
    "float16": {"rtol": 5e-3, "atol": 1e-3, "norm": 2e-3},
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference RMSNorm; plain PyTorch, so it also runs in float64."""

    def __init__(self, eps: float = EPS):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * w


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], case["N"], generator=g, dtype=torch.float32)
    w = 1.0 + 0.1 * torch.randn(case["N"], generator=g, dtype=torch.float32)
    return [x.to(_dtype(case)), w.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return [EPS]


def flops(case: dict) -> float:
    # square, sum, scale by rstd, multiply by w: about four operations per element.
    return 4.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x and w read once, y written once.
    return (2.0 * case["M"] * case["N"] + case["N"]) * _dtype(case).itemsize
