"""`exp2_folded_scale` on the H200, both ways: the skill's effect on the expert (the attention walk's step 9, its
parent against its child, read from a lineage), and what the transform buys on run 25's final for the naive
attention (the causal cut, P @ V on bf16 operands, 128x64 tiles, 8 warps, 3 stages), all timed side by side.

    PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_fold.py [LINEAGE_DIR]

LINEAGE_DIR is an attention lineage walked with the transform (default: the one under .state/run26prior, made on
the CPU at ddeb280 with `benchmarks/mine_all.py --device cpu`); without one only the naive pair is timed. Every
program is checked against torch's SDPA on the bench inputs first. GPU only; needs libcst."""

from __future__ import annotations

import datetime
import importlib.util
import json
import platform
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

from klineage.program import Program, install
from klineage.timing import time_calls
from klineage.transform import load_families

ROOT = Path(__file__).resolve().parent.parent
ATTENTION = ROOT / "src" / "klineage" / "examples" / "attention"
DEFAULT_LINEAGE = next(iter(sorted((ROOT / ".state/run26prior/home-attention/lineages").glob("attention-expert-*"))),
                       None)  # fmt: skip


def run25_final() -> str:
    """The naive attention as KLineage left it in run 25, rewritten by the same transforms."""
    families = load_families()
    source = (ATTENTION / "naive.py").read_text()
    cut = families["causal_bound"]()
    source = cut.optimize(source, cut.optimize_sites(source)[0], {"order": "diagonal_first"})
    half = families["dot_operand_dtype"]()
    source = half.optimize(source, half.optimize_sites(source)[0], {"cast": "other"})
    for old, new in (("BLOCK_M = BLOCK_N = 32", "BLOCK_M, BLOCK_N = 128, 64"),
                     ("num_warps=4, num_stages=1", "num_warps=8, num_stages=3")):  # fmt: skip
        if source.count(old) != 1:
            raise SystemExit(f"attention_fold: {old!r} is not in the naive program once")
        source = source.replace(old, new)
    return source


def folded(source: str) -> str:
    fold = load_families()["exp2_folded_scale"]()
    (site,) = fold.optimize_sites(source)
    return fold.optimize(source, site, {"form": "div", "constant": "LOG2E"})


def step9(lineage: Path) -> dict[str, str]:
    """The expert's step that undid the fold: its parent (the fold in place) and its child (without it)."""
    steps = [json.loads(line) for line in (lineage / "steps.jsonl").read_text().splitlines()]
    (step,) = [s for s in steps if s["transform"] == "exp2_folded_scale" and s["accepted"]]
    read = lambda h: (lineage / "sources" / h / "program.py").read_text()  # noqa: E731
    return {f"expert step {step['index']} parent (folded, exp2)": read(step["parent"]),
            f"expert step {step['index']} child (1/sqrt(D), exp)": read(step["child"])}  # fmt: skip


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU: nothing timed")
        return 1
    lineage = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_LINEAGE
    spec = importlib.util.spec_from_file_location("attention_workload", ATTENTION / "workload.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = module.CASES["bench"]
    q, k, v = (x.cuda() for x in module.make_inputs(case, seed=0))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
    base = run25_final()
    programs = {"naive, run 25's final": base, "naive, run 25's final + exp2_folded_scale": folded(base)}
    if lineage is not None and (lineage / "steps.jsonl").is_file():
        programs.update(step9(lineage))
    calls, names = [], []
    for name, source in programs.items():
        model = install(Program(name="variant", source=source)).ModelNew(case["causal"]).cuda()
        got = model(q, k, v)
        err = ((got.float() - want.float()).norm() / want.float().norm()).item()
        print(f"{name}: relative error norm against SDPA {err:.2e}")
        if not err < 1e-2:
            print(f"{name}: wrong, not timed")
            continue
        calls.append(lambda m=model: m(q, k, v))
        names.append(name)
    timings = time_calls(calls, 25.0, 400.0, 30)
    print()
    print("command: PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_fold.py")
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, Triton {triton.__version__}, "
          f"Python {platform.python_version()}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"case: {case}; lineage: {lineage}")
    print("| program | median ms | spread |")
    print("| --- | --- | --- |")
    for name, t in zip(names, timings):
        print(f"| {name} | {t.median_ms:.3f} | {t.spread:.3f} |")
    ms = dict(zip(names, (t.median_ms for t in timings)))
    keys = list(programs)
    # (with the fold, without it): the naive pair, then the expert's step (its parent has the fold)
    for fast, slow in ((keys[1], keys[0]), *(((keys[2], keys[3]),) if len(keys) == 4 else ())):
        if fast in ms and slow in ms:
            print(f"{fast} against {slow}: x{ms[slow] / ms[fast]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
