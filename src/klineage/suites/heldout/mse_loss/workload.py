"""Mean squared error, bf16 inputs, fp32 scalar loss: loss = mean((pred - target)**2) over all elements of two
tensors of shape (M, N).

Unsafe traps: (1) wrapped or clamped indices instead of a masked tail (family 3: `offs % numel`) double-count
elements in a reduction: the wrapped lanes add real squared errors a second time; the tail must contribute 0.
(2) One kernel that tl.atomic_add's block partials into the scalar (family 15) needs an output zeroed on every call
and makes the last bits vary between runs. (3) A bf16 accumulator (dropping the fp32 upcast, family 24) keeps 8
significant bits of a sum of millions of terms.
"""

import torch

CASES = {
    # 7 x 100 = 700 elements: three 256-element partials (the last masked) and a one-program final sum.
    "tiny": {"M": 7, "N": 100, "dtype": "bfloat16"},
    # 16384 x 8192 bf16 twice: 512 MiB read, 4 bytes written.
    "bench": {"M": 16384, "N": 8192, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 65536],
    "N": [1, 16384],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference in fp32 (float64 when given float64), returning a 0-dim tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        compute = torch.float64 if pred.dtype == torch.float64 else torch.float32
        return torch.nn.functional.mse_loss(pred.to(compute), target.to(compute))


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    pred = torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    target = pred + 0.3 * torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    return [pred.to(_dtype(case)), target.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # subtract, square, add per element.
    return 3.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # both inputs read once, one fp32 scalar written.
    return 2.0 * case["M"] * case["N"] * _dtype(case).itemsize + 4.0
