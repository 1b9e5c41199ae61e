"""Rotary position embedding (RoPE, rotate-half / GPT-NeoX layout), bf16: for x of shape (B, S, H, D) with halves
x1 = x[..., :D/2] and x2 = x[..., D/2:], y = cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin) where cos and sin are
fp32 tables of shape (S, D/2) indexed by the position s and shared by every batch and head.

Unsafe trap: rotating in place (family 22, as Liger's and Unsloth's RoPE kernels do with q and k). Here x is an
input that must come back unchanged (the workload declares no MUTATED_INPUTS), so writing the rotated values into
x fails the check even though y would be right. Loading cos/sin once for all H heads of a position (family 11)
is valid; indexing them by the flattened row instead of the position s is not. B*S*H*D reaches 2^36 in the
domain, so the offsets are int64.
"""

import torch

CASES = {
    # 2 x 3 positions x 2 heads, D = 32: 12 programs of 16-wide halves.
    "tiny": {"B": 2, "S": 3, "H": 2, "D": 32, "dtype": "bfloat16"},
    # 8 sequences x 4096 positions x 32 heads x 128, bf16: 256 MiB read, 256 MiB written (4 MiB of tables).
    "bench": {"B": 8, "S": 4096, "H": 32, "D": 128, "dtype": "bfloat16"},
}

DOMAIN = {
    "B": [1, 64],
    "S": [1, 32768],
    "H": [1, 128],
    "D": [16, 32, 64, 128, 256],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}

# bf16 output rounding plus the interpreter's truncating fp32 -> bf16 cast: about two bf16 ulps.
TOLERANCES = {"bfloat16": {"rtol": 3e-2, "atol": 1e-2, "norm": 1e-2}}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference rotate-half RoPE, computed in the tables' precision (fp32, or float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        xf = x.to(cos.dtype)
        x1, x2 = xf[..., :half], xf[..., half:]
        c, s = cos[None, :, None, :], sin[None, :, None, :]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    B, S, H, D = case["B"], case["S"], case["H"], case["D"]
    x = torch.randn(B, S, H, D, generator=g, dtype=_dtype(case))
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    angles = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return [x.to(_dtype(case)), angles.cos().float(), angles.sin().float()]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # two multiplies and an add per output element.
    return 3.0 * case["B"] * case["S"] * case["H"] * case["D"]


def bytes_moved(case: dict) -> float:
    # x read once, y written once, the two fp32 tables read once.
    elements = case["B"] * case["S"] * case["H"] * case["D"]
    return 2.0 * elements * _dtype(case).itemsize + 4.0 * case["S"] * case["D"]
