"""SwiGLU forward: c = silu(a) * b, row-wise over the hidden dimension (the gated MLP of LLaMA-style models)."""

import torch


class Model(torch.nn.Module):
    def forward(self, a, b):
        x = a if a.dtype == torch.float64 else a.float()
        return (torch.nn.functional.silu(x) * b.to(x.dtype)).to(a.dtype)


CASES = {
    "tiny": {"rows": 6, "cols": 100, "dtype": "float32"},
    "odd": {"rows": 5, "cols": 1000, "dtype": "bfloat16"},
    "bench": {"rows": 8192, "cols": 14336, "dtype": "bfloat16"},
}
DOMAIN = {"rows": [1, 65536], "cols": [1, 65536], "dtype": ["float32", "float16", "bfloat16"]}
TOLERANCES = {"bfloat16": {"rtol": 3e-2, "atol": 1e-2, "norm": 1e-2}}


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    return [torch.randn(case["rows"], case["cols"], generator=g).to(dtype) for _ in range(2)]


def get_inputs():
    return make_inputs(CASES["bench"], 0)


def get_init_inputs():
    return []


def flops(case):
    return 6.0 * case["rows"] * case["cols"]


def bytes_moved(case):
    size = 4 if case["dtype"] == "float32" else 2
    return 3.0 * size * case["rows"] * case["cols"]
