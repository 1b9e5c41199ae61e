"""KL divergence between row distributions given as logits, batchmean: loss = (1/M) * sum over rows of
KL(P || Q) with P = softmax(target_logits) and Q = softmax(pred_logits), for bf16 logits of shape (M, N); the loss
is an fp32 scalar. Same as torch.nn.functional.kl_div(log Q, log P, reduction="batchmean", log_target=True).

Unsafe traps: (1) reducing the rows with tl.atomic_add into the scalar (family 15) needs an output zeroed on every
call (torch.empty is poisoned here) and makes the sum order, hence the last bits, vary between runs; (2) the
batchmean divisor is M (rows), not M * N as reduction="mean" would use; (3) forming log P as log(softmax) instead
of t - max - log(sum) gives log(0) = -inf where exp underflows (scaled inputs), and 0 * -inf = NaN.
"""

import torch

CASES = {
    # 3 rows of 200 logits: two 128-wide tiles per sweep, the last one masked.
    "tiny": {"M": 3, "N": 200, "dtype": "bfloat16"},
    # 4096 rows x a 32000-token vocabulary, two bf16 inputs: 500 MiB read, 4 bytes written.
    "bench": {"M": 4096, "N": 32000, "dtype": "bfloat16"},
}

DOMAIN = {
    "M": [1, 8192],
    "N": [2, 131072],
    "dtype": ["bfloat16"],
    "layout": ["contiguous"],
}


def _dtype(case: dict) -> torch.dtype:
    return getattr(torch, case["dtype"])


class Model(torch.nn.Module):
    """Reference in fp32 (float64 when given float64 inputs), returning a 0-dim tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, pred_logits: torch.Tensor, target_logits: torch.Tensor) -> torch.Tensor:
        compute = torch.float64 if pred_logits.dtype == torch.float64 else torch.float32
        log_q = torch.log_softmax(pred_logits.to(compute), dim=-1)
        log_p = torch.log_softmax(target_logits.to(compute), dim=-1)
        return torch.nn.functional.kl_div(log_q, log_p, reduction="batchmean", log_target=True)


def make_inputs(case: dict, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    pred = 2.0 * torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    target = 2.0 * torch.randn(case["M"], case["N"], generator=g, dtype=_dtype(case))
    return [pred.to(_dtype(case)), target.to(_dtype(case))]


def get_inputs() -> list:
    return make_inputs(CASES["bench"], seed=0)


def get_init_inputs() -> list:
    return []


def flops(case: dict) -> float:
    # two log-softmaxes (about five operations each) and p * (log p - log q) summed (four): about 14 per element.
    return 14.0 * case["M"] * case["N"]


def bytes_moved(case: dict) -> float:
    # both logit tensors read once, one fp32 scalar written.
    return 2.0 * case["M"] * case["N"] * _dtype(case).itemsize + 4.0
