"""What noting the program's functions costs an interpreted grid (gates.candidate._calls_into, RESULTS.md#calls-into):
a 2x2 pooling kernel over a 16x16x16x16 input (256 programs) under Triton's interpreter with the project's patches,
run plain and under `_calls_into`, three times each. Run it with a tree's `src` first on the path to measure that tree
(the figure before the change came from c274506's):

    PYTHONPATH=src python benchmarks/calls_into_hook.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from klineage.gates.candidate import _calls_into  # noqa: E402
from klineage.interp import patch_interpreter  # noqa: E402


@triton.jit
def pool(x_ptr, out_ptr, H, W, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    nc = tl.program_id(0)
    hb = tl.program_id(1)
    nwb = tl.cdiv(W // 2, BLOCK_W)
    h = (hb // nwb) * BLOCK_H + tl.arange(0, BLOCK_H)
    w = (hb % nwb) * BLOCK_W + tl.arange(0, BLOCK_W)
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for kh in range(0, 2):
        for kw in range(0, 2):
            hi = h[:, None] * 2 + kh
            wi = w[None, :] * 2 + kw
            m = (hi < H) & (wi < W)
            acc += tl.load(x_ptr + nc * H * W + hi * W + wi, mask=m, other=0.0)
    om = (h[:, None] < H // 2) & (w[None, :] < W // 2)
    tl.store(out_ptr + nc * (H // 2) * (W // 2) + h[:, None] * (W // 2) + w[None, :], acc / 4, mask=om)


def main() -> None:
    patch_interpreter()
    x, out = torch.randn(16, 16, 16, 16), torch.empty(16, 16, 8, 8)

    def run() -> None:
        pool[(256, 1)](x, out, 16, 16, BLOCK_H=8, BLOCK_W=8)

    run()  # the interpreter's rewrite of the kernel, once
    root = str(Path(__file__).resolve().parent)  # this file: the kernel counts as the program's
    for _ in range(3):
        began = time.perf_counter()
        run()
        plain = time.perf_counter() - began
        found: set = set()
        began = time.perf_counter()
        with _calls_into(found, root):
            run()
        print(f"plain {plain:.2f} s, noted {time.perf_counter() - began:.2f} s, functions noted {sorted(found)}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"torch {torch.__version__}, triton {triton.__version__}, {when}")


if __name__ == "__main__":
    main()
