"""GeGLU, bf16: y = gelu_tanh(x[:, :N]) * x[:, N:] for x of shape (M, 2N), the fused gate/up projection output of a
gated MLP; y has shape (M, N).

Unsafe trap: treating a half as a contiguous vector. The gate and up halves are column slices of one row-major
buffer, so each has row stride 2N, not N: flat 1-D indexing over M * N elements, or `tl.max_contiguous` /
`tl.multiple_of` hints on a block that runs past the end of a half-row (family 2), read the other half. The domain's
N is any width (tiny N = 48, not a multiple of the 128-wide column block), so the column mask must stay too.
"""

import torch

CASES = {
    # 3 rows, N = 48: one masked 128-wide column block per row.
    "tiny": {"M": 3, "N": 48, "dtype": "bfloat16"},
    # 8192 tokens, N = 11008 (LLaMA-7B's MLP width), bf16: 344 MiB read, 172 MiB written.
    "bench": {"M": 8192, "N": 11008, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 32768],
    "N": [1, 16384],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}

# bf16 output rounding (8 significant bits) on top of a gelu whose derivative reaches 1.13, and the interpreter
# truncates fp32 -> bf16 where the GPU rounds: about two bf16 ulps.
TOLERANCES = {"bfloat16": {"rtol": 3e-2, "atol": 1e-2, "norm": 1e-2}}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference GeGLU on the two halves of the last dimension (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x if x.dtype == torch.float64 else x.float()
        gate, up = xf.chunk(2, dim=-1)
        return (torch.nn.functional.gelu(gate, approximate="tanh") * up).to(x.dtype)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(case["M"], 2 * case["N"], generator=g, dtype=_dtype(case))
    return [x.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # gelu (about 11 operations) and the product, per output element.
    return 12.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # x (2N per row) read once, y (N per row) written once.
    return 3.0 * case["M"] * case["N"] * _dtype(case).itemsize
