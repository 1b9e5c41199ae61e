"""Model replies written for the tests: the bundled naive softmax rewritten (correctly, wrongly, or as a cheat)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import EXAMPLES

NAIVE = (EXAMPLES / "softmax" / "naive.py").read_text()

# a correct rewrite: exp through exp2 with the log2(e) scale folded in (family 18)
EXP2 = NAIVE.replace("num = tl.exp(x - x_max)", "num = tl.exp2((x - x_max) * 1.4426950408889634)")
assert EXP2 != NAIVE

# a cheat: forward computes the answer with PyTorch (the kernel still runs, so only the torch-compute check fails)
CHEAT = NAIVE.replace("        return y.view(x.shape)", "        return torch.softmax(x, dim=-1)")
assert CHEAT != NAIVE

RENAMED = NAIVE.replace("softmax_kernel", "softmax_kernel_fast")
SYNTAX = NAIVE.replace("def forward(self, x: torch.Tensor) -> torch.Tensor:", "def forward(self, x: torch.Tensor) ->")
NO_MODEL = NAIVE.replace("class ModelNew(", "class Model(")


def answer(source: str, intent: str = "exp2 with the scale folded in") -> str:
    return f"INTENT: {intent}\n\nHere is the program.\n\n```python\n{source}```\n"


def write(path: Path, source: str) -> Path:
    path.write_text(source)
    return path
