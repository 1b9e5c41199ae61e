"""The naive attention with the causal cut, at the expert's tiles, with P @ V on fp32 operands (as the naive writes
it) against half-precision ones (`dot_operand_dtype`), timed side by side on the attention bench case.

    PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_operand.py

Why: the attention walk refuses to undo the expert's `p.to(v.dtype)` (at its 128x128 tile and 3 stages fp32
operands need 263184 bytes of shared memory, the sm_90 limit is 232448), so the library holds it as a guard, and on
the naive program KLineage's 128x128 tile is refused for the same reason (262144 bytes). This measures what the
guard's construct buys there. Each variant is written from the bundled naive program by the transforms themselves,
checked against torch's SDPA on the bench inputs, and timed interleaved with the L2 flushed (klineage.timing).
GPU only; needs libcst."""

from __future__ import annotations

import sys

import torch
from attention_bench import naive_as_klineage_leaves_it, time_variants


def variants() -> dict[str, str]:
    return {
        "cut, 128x64 w8 s3, fp32 P@V (run 24's final's form)": naive_as_klineage_leaves_it((128, 64, 8, 3), half=False),
        "cut, 128x64 w8 s3, half P@V": naive_as_klineage_leaves_it((128, 64, 8, 3)),
        "cut, 128x128 w8 s3, half P@V": naive_as_klineage_leaves_it((128, 128, 8, 3)),
        "cut, 128x128 w8 s2, half P@V": naive_as_klineage_leaves_it((128, 128, 8, 2)),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU: nothing timed")
        return 1
    time_variants(variants(), "PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_operand.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
