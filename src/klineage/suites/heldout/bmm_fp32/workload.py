"""Batched matrix product in fp32: C[i] = A[i] @ B[i] for A of shape (BATCH, M, K) and B of shape (BATCH, K, N),
computed to fp32 accuracy.

Unsafe trap: TF32 (family 25). Triton's default for an fp32 tl.dot is tf32, 10 mantissa bits, about 1e-3 relative
error: a hundred times this workload's fp32 tolerance (on the H200 a variant without input_precision="ieee" failed
at a relative error norm of 7.8e-4). The interpreter computes fp32 dots exactly whatever the precision flag says, so
only a GPU check sees this failure.
Also: BATCH * M * K reaches 2^34 in the domain, so the per-batch offsets are int64.
"""

import torch

CASES = {
    # 3 batches of 20 x 24 with K = 40: one ragged 32x32 tile per batch, a masked second K step.
    "tiny": {"BATCH": 3, "M": 20, "N": 24, "K": 40, "dtype": "float32"},
    # 8 batches of 2048^3, fp32: 137 GFLOP on the CUDA cores (no tensor cores at ieee precision).
    "bench": {"BATCH": 8, "M": 2048, "N": 2048, "K": 2048, "dtype": "float32"},
}

DOMAIN = {
    "BATCH": [1, 1024],
    "M": [1, 4096],
    "N": [1, 4096],
    "K": [1, 4096],
    "dtype": ["float32"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: torch.bmm (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(case["BATCH"], case["M"], case["K"], generator=g, dtype=torch.float32)
    b = torch.randn(case["BATCH"], case["K"], case["N"], generator=g, dtype=torch.float32)
    return [a.to(_dtype(case)), b.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    return 2.0 * case["BATCH"] * case["M"] * case["N"] * case["K"]


def bytes_moved(case: dict) -> float:
    # A and B read once, C written once.
    per_batch = case["M"] * case["K"] + case["K"] * case["N"] + case["M"] * case["N"]
    return float(case["BATCH"] * per_batch) * _dtype(case).itemsize
