"""Vector add with a strided input, fp32: z = x + y where x is a non-contiguous view (every other element of a
buffer twice as long, stride 2) and y is contiguous; z of shape (N,) is contiguous.

Unsafe trap: contiguity and alignment hints on x's offsets (family 2), e.g.
`x_offs = tl.max_contiguous(tl.multiple_of(offs * x_stride, BLOCK), BLOCK)`, or a launcher that assumes
x.is_contiguous() and indexes x as `offs`. The hint claims what never holds here (x's elements are 8 bytes apart).
With the naive BLOCK = 128 (one element per thread) it changes nothing: such a variant passed on the H200. Once a
launch-configuration step gives each thread 4 or more elements (BLOCK >= 512), Triton 3.6 turns the hinted x load
into 128-bit vector loads (seen in the sm_90 PTX), which read consecutive buffer elements instead of every other
one. The stride-1 launcher is wrong at any block size. A host-side x.contiguous() copy is correct but costs an
extra read and write of x. The DOMAIN layout is "strided" for x.
"""

import torch

CASES = {
    # N = 333: three 128-wide blocks, the last one masked.
    "tiny": {"N": 333, "dtype": "float32"},
    # N = 2^25 fp32: x spans 256 MiB (a stride-2 read touches every sector of it), y 128 MiB, z 128 MiB.
    "bench": {"N": 33554432, "dtype": "float32"},
}

DOMAIN = {
    "N": [1, 2**29],
    "dtype": ["float32"],
    "layout": ["strided"],
    "x_stride": [2],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference: x + y (also runs in float64)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(2 * case["N"], generator=g, dtype=torch.float32).to(_dtype(case))
    y = torch.randn(case["N"], generator=g, dtype=torch.float32).to(_dtype(case))
    return [base[::2], y]  # x: a stride-2 view, never contiguous


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    return float(case["N"])


def bytes_moved(case: dict) -> float:
    # x's 2N-element span (DRAM sectors are 32 bytes, so a stride-2 fp32 read fetches all of it), y read, z written.
    return 4.0 * case["N"] * _dtype(case).itemsize
