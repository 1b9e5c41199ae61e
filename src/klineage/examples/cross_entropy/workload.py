"""Cross-entropy forward that also writes d(loss)/d(logits) into the logits in place (Liger-Kernel's trick to
save a logits-sized buffer). Mean reduction over the rows whose target is not ignore_index.

The reference mutates its logits the same way, and MUTATED_INPUTS tells the harness to compare the mutated logits
with the float64 reference's instead of failing the mutation. HOST_OPS lets a program do the host-side
bookkeeping Liger does (count the non-ignored rows, bounds-check the targets, sum the per-row losses)."""

import torch

IGNORE_INDEX = -100


class Model(torch.nn.Module):
    def __init__(self, ignore_index: int = IGNORE_INDEX):
        super().__init__()
        self.ignore_index = ignore_index

    def forward(self, logits, target):
        x = logits if logits.dtype == torch.float64 else logits.float()
        keep = target != self.ignore_index
        n = keep.sum().clamp_min(1)
        safe = torch.where(keep, target, torch.zeros_like(target))
        lse = torch.logsumexp(x, dim=-1)
        picked = x.gather(-1, safe[:, None])[:, 0]
        loss = ((lse - picked) * keep).sum() / n
        grad = torch.softmax(x, dim=-1)
        grad = grad - torch.nn.functional.one_hot(safe, x.shape[-1]).to(x.dtype)
        grad = grad * keep[:, None] / n
        logits.copy_(grad.to(logits.dtype))
        return loss.to(logits.dtype)


CASES = {
    "tiny": {"rows": 6, "vocab": 100, "dtype": "float32", "ignored": 1},
    "odd": {"rows": 5, "vocab": 300, "dtype": "float32", "ignored": 0},
    "bench": {"rows": 8192, "vocab": 32000, "dtype": "bfloat16", "ignored": 256},
}
DOMAIN = {"rows": [1, 65536], "vocab": [2, 262144], "dtype": ["float32", "bfloat16"], "layout": ["contiguous"]}
MUTATED_INPUTS = (0,)
HOST_OPS = ("ne", "sum", "mul", "max", "min", "lt", "ge")


def make_inputs(case, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(case["rows"], case["vocab"], generator=g).to(getattr(torch, case["dtype"]))
    target = torch.randint(0, case["vocab"], (case["rows"],), generator=g)
    if case["ignored"]:
        target[torch.randperm(case["rows"], generator=g)[: case["ignored"]]] = IGNORE_INDEX
    return [logits, target]


def get_inputs():
    return make_inputs(CASES["bench"], 0)


def get_init_inputs():
    return [IGNORE_INDEX]


def flops(case):
    return 6.0 * case["rows"] * case["vocab"]


def bytes_moved(case):
    size = 2 if case["dtype"] == "bfloat16" else 4
    return 2.0 * size * case["rows"] * case["vocab"]  # read the logits, write the gradient in their place
