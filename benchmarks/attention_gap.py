"""What is left between the naive attention, once KLineage has cut its causal loop and halved its P @ V operands,
and the expert: each remaining expert construct added alone to that program, then all together, timed side by
side with the expert on the attention bench case.

    PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_gap.py

The start is written by the transforms themselves (`causal_bound`, then `dot_operand_dtype`, at the expert's
128x128 tile, 8 warps, 3 stages: what `SkillProposer.after_refusal` makes of the refused tile). The constructs are
the expert's (src/klineage/examples/attention/expert.py), written into the naive program by text edits here,
because no transform writes them yet; this measures which one would be worth a transform:

- `dot_acc`: P @ V accumulated by the MMA itself, `tl.dot(p, v, acc * alpha)`, instead of `acc * alpha + dot`;
- `exp2`: sm_scale * log2(e) folded on the host, `tl.exp2` in the kernel (catalog family 18 across host and kernel);
- `heavy_first`: query blocks launched heaviest first (`pid_m` reversed when causal; family 13's tail balance);
- `split`: the key blocks every row sees in full swept first without any mask, the diagonal block (or the partial
  last block) after, with masks (family 5; the sequence must be a multiple of the key block, as here).

Every variant is checked against torch's SDPA on the bench inputs before it is timed. GPU only; needs libcst."""

from __future__ import annotations

import sys

import torch
from attention_bench import ATTENTION, edit, naive_as_klineage_leaves_it, time_variants


def start() -> str:
    return naive_as_klineage_leaves_it((128, 128, 8, 3))


def dot_acc(source: str) -> str:
    return edit(
        source,
        "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
        "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])",
    )


def exp2(source: str) -> str:
    source = edit(source, "p = tl.exp(s - m_new[:, None])", "p = tl.exp2(s - m_new[:, None])")
    source = edit(source, "alpha = tl.exp(m_i - m_new)", "alpha = tl.exp2(m_i - m_new)")
    return edit(source, "1.0 / D**0.5, S,", "1.4426950408889634 / D**0.5, S,")


def heavy_first(source: str) -> str:
    reverse = "    if CAUSAL:\n        pid_m = tl.num_programs(0) - 1 - pid_m\n"
    return edit(source, "pid_m = tl.program_id(0)\n", "pid_m = tl.program_id(0)\n" + reverse)


HI = "tl.minimum(pid_m * BLOCK_M + BLOCK_M, seq_len) if CAUSAL else seq_len"
MASK = (
    "        keep = col_ok[None, :]\n        if CAUSAL:\n"
    "            keep = keep & (offs_n[None, :] <= offs_m[:, None])\n"
    '        s = tl.where(keep, s, float("-inf"))\n'
)


def split(source: str) -> str:
    head = f"    for start_n in range(0, {HI}, BLOCK_N):\n"
    tail = "    out = acc"
    i, j = source.index(head), source.index(tail)
    body = source[i + len(head) : j]
    free = body
    for old, new in (
        ("        col_ok = offs_n < seq_len\n", ""),
        (", mask=col_ok[None, :], other=0.0)", ")"),
        (", mask=col_ok[:, None], other=0.0)", ")"),
        (MASK, ""),
    ):
        free = edit(free, old, new)
    loops = (
        "    mid = pid_m * BLOCK_M if CAUSAL else (seq_len // BLOCK_N) * BLOCK_N\n"
        "    for start_n in range(0, mid, BLOCK_N):\n"
        + free
        + f"    for start_n in range(mid, {HI}, BLOCK_N):\n"
        + body
    )
    return source[:i] + loops + source[j:]


def variants() -> dict[str, str]:
    base = start()
    return {
        "start: cut + half P@V, 128x128 w8 s3": base,
        "+ dot_acc": dot_acc(base),
        "+ exp2": exp2(base),
        "+ heavy_first": heavy_first(base),
        "+ split": split(base),
        "+ all four": split(heavy_first(exp2(dot_acc(base)))),
        "expert": (ATTENTION / "expert.py").read_text(),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU: nothing timed")
        return 1
    time_variants(variants(), "PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_gap.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
