"""The attention expert's two newest skills on the H200, both ways: `exp2_folded_scale` (family 18 across host and
kernel) and `masked_stage_split` (family 5). For each, the effect on the expert (the attention walk's step that
undid it: its parent against its child, read from a lineage), and what the transform buys on the naive
attention's final program of RESULTS.md#run-25 (the causal cut, P @ V on bf16 operands, 128x64 tiles, 8 warps, 3
stages), alone and together.
All timed side by side, interleaved, with the L2 flushed.

    PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_skills.py [LINEAGE_DIR]

LINEAGE_DIR is an attention lineage walked with both transforms (default: the one under .state/run26prior, made on
the CPU with `benchmarks/mine_all.py --device cpu`); without one only the naive programs are timed. Every program
is checked against torch's SDPA on the bench inputs first. GPU only; needs libcst."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from attention_bench import naive_as_klineage_leaves_it, time_variants

from klineage.transform import load_families

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LINEAGE = next(
    iter(sorted((ROOT / ".state/run26prior/home-attention/lineages").glob("attention-expert-*"))), None
)


def run25_final() -> str:
    """The naive attention as KLineage left it (RESULTS.md#run-25: the cut, bf16 P @ V, 128x64, 8 warps, 3 stages)."""
    return naive_as_klineage_leaves_it((128, 64, 8, 3))


def applied(source: str, family: str) -> str:
    """`family`'s transform at its one site in the program."""
    transform = load_families()[family]()
    (site,) = transform.optimize_sites(source)
    return transform.optimize(source, site, {"form": "div", "constant": "LOG2E"} if family == FOLD else {})


FOLD, SPLIT = "exp2_folded_scale", "masked_stage_split"


def walk_steps(lineage: Path) -> dict[str, str]:
    """For each new family, the expert's step that undid it: its parent (with it) and its child (without)."""
    steps = [json.loads(line) for line in (lineage / "steps.jsonl").read_text().splitlines()]
    read = lambda h: (lineage / "sources" / h / "program.py").read_text()  # noqa: E731
    out = {}
    for step in steps:
        if step["transform"] in (FOLD, SPLIT) and step["accepted"]:
            out[f"expert step {step['index']} parent (with {step['transform']})"] = read(step["parent"])
            out[f"expert step {step['index']} child (without)"] = read(step["child"])
    return out


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU: nothing timed")
        return 1
    lineage = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_LINEAGE
    base = run25_final()
    programs = {
        "naive, run 25's final": base,
        f"naive + {FOLD}": applied(base, FOLD),
        f"naive + {SPLIT}": applied(base, SPLIT),
        "naive + both": applied(applied(base, FOLD), SPLIT),
    }
    if lineage is not None and (lineage / "steps.jsonl").is_file():
        programs.update(walk_steps(lineage))
    ms = time_variants(programs, "PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_skills.py")
    print(f"lineage: {lineage}")
    keys = list(programs)
    # (with the skill, without it): the naive program's three, then each walk step (its parent has the skill)
    pairs = [(k, keys[0]) for k in keys[1:4]] + [(keys[i], keys[i + 1]) for i in range(4, len(keys) - 1, 2)]
    for fast, slow in pairs:
        if fast in ms and slow in ms:
            print(f"{fast} against {slow}: x{ms[slow] / ms[fast]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
