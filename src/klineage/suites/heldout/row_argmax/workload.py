"""Row maximum and its index, bf16: values = x.amax(-1) and indices = x.argmax(-1) (int64, the first maximal
position on ties) for x of shape (M, N), e.g. greedy decoding over a vocabulary.

Unsafe trap: losing first-index tie-breaking. bf16 keeps 8 significant bits, so rows tie often, and the named
cases draw x from 41 integer values, where every row's maximum repeats. A split of the row over several programs
(family 15: tl.atomic_max on a packed value, or partial maxima combined in any order) or a tile loop that updates
its best on >= instead of > returns a later index than torch.argmax.
"""

import torch

CASES = {
    # 4 rows of 200 integer-valued entries: two 128-wide tiles per row, ties on every row's maximum.
    "tiny": {"M": 4, "N": 200, "dtype": "bfloat16"},
    # 4096 rows x a 32000-token vocabulary, bf16: 250 MiB read, 40 KiB written.
    "bench": {"M": 4096, "N": 32000, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 16384],
    "N": [1, 131072],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: the row maximum and the first index where it occurs (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return x.amax(dim=-1), x.argmax(dim=-1)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-20, 21, (case["M"], case["N"]), generator=g, dtype=torch.int8)
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # one compare (and select) per element.
    return float(case["M"] * case["N"])


def bytes_moved(case: dict) -> float:
    # x read once; one value and one int64 index written per row.
    return float(case["M"] * case["N"]) * _dtype(case).itemsize + case["M"] * (_dtype(case).itemsize + 8.0)
