"""Scaled dot-product attention forward: O = softmax(Q K^T * sm_scale [+ causal mask]) V, sm_scale = 1/sqrt(D).

q, k, v and O have shape (B, H, S, D) (batch, heads, sequence, head dim), one dtype (bf16 or fp16). Whether the
attention is causal (query i sees keys j <= i) is part of the case: `make_init_inputs(case)` hands it to the
constructor of the reference Model and of every ModelNew, so one workload covers both masks.

KernelBench core (Model, get_inputs, get_init_inputs) plus the KLineage extensions.
"""

import math

import torch

CASES = {
    # The tiny cases run under the Triton interpreter in a few seconds and cover every path of a tiled kernel
    # (with the 64 x 32 tiles an autotuned kernel keeps for short sequences): S = 80 is a multiple of no query
    # block, so the causal path runs two query blocks, the second one ragged, with a mask-free block left of the
    # diagonal and a masked diagonal whose last key block is partial. fp16 (native in the interpreter).
    "tiny": {"B": 1, "H": 2, "S": 80, "D": 16, "causal": True, "dtype": "float16"},
    # No mask, two batches of one head (the batch stride), S = 40: full key blocks, then a partial last one. bf16.
    "tiny_full": {"B": 2, "H": 1, "S": 40, "D": 16, "causal": False, "dtype": "bfloat16"},
    # S a multiple of every block: the mask-free (EVEN) loads, another head dim, bf16.
    "even": {"B": 1, "H": 2, "S": 64, "D": 32, "causal": True, "dtype": "bfloat16"},
    # Llama-style prefill on an H200: 4 x 32 heads x 4096 tokens x 128, causal bf16 (0.55 TFLOP).
    "bench": {"B": 4, "H": 32, "S": 4096, "D": 128, "causal": True, "dtype": "bfloat16"},
}

DOMAIN = {
    "B": [1, 64],
    "H": [1, 128],
    "S": [1, 32768],
    "D": [16, 32, 64, 128],  # powers of two: the head dim is one tile
    "causal": [True, False],
    "dtype": ["bfloat16", "float16"],
    "layout": ["contiguous"],
}

# A kernel multiplies half-precision Q and K exactly into fp32 scores and rounds only the softmax weights P (the
# operand of P @ V) and the output to the input dtype. Over thousands of keys an output element can be a sum that
# nearly cancels, so its error is large next to its own value: PyTorch's own SDPA (CPU, bf16, causal S=4096, B=1 H=4)
# has 43 of 2.1M elements beyond rtol 2e-2 + atol 1e-2*rms and 1 beyond 2e-2*rms, none beyond 5e-2*rms (fp16: 21
# beyond 1e-3*rms, none beyond 5e-3*rms), at a relative error norm of 2.1e-3 (fp16 2.6e-4). The H200 run of the
# expert on the bench case measured 2.06e-3 with 1171 of 67M elements beyond 1e-2*rms. The absolute floors below sit
# past those tails; the norm limits, which an unwritten or wrong block cannot pass, stay the harness's.
# tests/gates/test_reference_tolerance.py checks that PyTorch's SDPA passes them.
TOLERANCES = {
    "bfloat16": {"rtol": 2e-2, "atol": 5e-2, "norm": 1e-2},
    "float16": {"rtol": 1e-2, "atol": 5e-3, "norm": 2e-3},
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference attention in plain PyTorch (runs in float64): scores, mask, softmax, weighted sum."""

    def __init__(self, causal: bool = True):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        if self.causal:
            s = q.shape[-2]
            future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    shape = (case["B"], case["H"], case["S"], case["D"])
    q, k, v = (torch.randn(shape, generator=g, dtype=torch.float32) for _ in range(3))
    return [q.to(_dtype(case)), k.to(_dtype(case)), v.to(_dtype(case))]


def make_init_inputs(case: dict) -> list:
    return [case["causal"]]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return make_init_inputs(CASES["bench"])


def flops(case: dict) -> float:
    # Q K^T and P V: 2 * S * S * D multiply-adds each per (batch, head); a causal mask leaves half of them.
    total = 4.0 * case["B"] * case["H"] * case["S"] * case["S"] * case["D"]
    return total / 2 if case["causal"] else total


def bytes_moved(case: dict) -> float:
    # q, k, v read once, O written once.
    return 4.0 * case["B"] * case["H"] * case["S"] * case["D"] * _dtype(case).itemsize
