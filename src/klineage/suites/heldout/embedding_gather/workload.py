"""Embedding lookup (row gather), bf16: y[t] = table[ids[t]] for an int64 id vector of shape (T,) and a table of
shape (V, D); y has shape (T, D). Ids repeat and arrive in any order.

Unsafe trap: 32-bit row offsets (undoing family 27's int64 arithmetic, or casting the ids to int32 to save
registers). Tables past 2^31 elements are in the domain (Llama-3-405B's 128256 x 16384 embedding has 2.1e9), where
id * D overflows int32: on the H200, an int32-row variant hit an illegal memory access on a 140000 x 16384 bf16
table while the naive program (ids loaded as int64, so id * D stays 64-bit) gathered every row exactly.
"""

import torch

CASES = {
    # 5 tokens into a 50 x 40 table: one 128-wide (masked) column tile per token, repeated ids.
    "tiny": {"T": 5, "V": 50, "D": 40, "dtype": "bfloat16"},
    # 16384 tokens x 4096, from a 32000 x 4096 bf16 table (250 MiB): 128 MiB gathered, 128 MiB written.
    "bench": {"T": 16384, "V": 32000, "D": 4096, "dtype": "bfloat16"},
}

DOMAIN = {
    "T": [1, 65536],
    "V": [1, 262144],
    "D": [1, 16384],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: torch.nn.functional.embedding (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, table)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, case["V"], (case["T"],), generator=g)
    ids[-1] = ids[0]  # at least one repeated id
    table = torch.randn(case["V"], case["D"], generator=g, dtype=_dtype(case))
    return [ids, table.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    return 0.0  # a pure gather


def bytes_moved(case: dict) -> float:
    # the ids read, the T gathered rows read, y written.
    return 8.0 * case["T"] + 2.0 * case["T"] * case["D"] * _dtype(case).itemsize
