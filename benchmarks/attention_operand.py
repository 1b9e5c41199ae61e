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

import datetime
import importlib.util
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


def variants() -> dict[str, str]:
    families = load_families()
    naive = (ATTENTION / "naive.py").read_text()
    cut = families["causal_bound"]()
    naive = cut.optimize(naive, cut.optimize_sites(naive)[0], {"order": "diagonal_first"})
    half = families["dot_operand_dtype"]()

    def tile(source: str, m: int, n: int, warps: int, stages: int) -> str:
        return source.replace("BLOCK_M = BLOCK_N = 32", f"BLOCK_M, BLOCK_N = {m}, {n}").replace(
            "num_warps=4, num_stages=1", f"num_warps={warps}, num_stages={stages}")

    halved = half.optimize(naive, half.optimize_sites(naive)[0], {"cast": "other"})
    return {
        "cut, 128x64 w8 s3, fp32 P@V (run 24's final's form)": tile(naive, 128, 64, 8, 3),
        "cut, 128x64 w8 s3, half P@V": tile(halved, 128, 64, 8, 3),
        "cut, 128x128 w8 s3, half P@V": tile(halved, 128, 128, 8, 3),
        "cut, 128x128 w8 s2, half P@V": tile(halved, 128, 128, 8, 2),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU: nothing timed")
        return 1
    spec = importlib.util.spec_from_file_location("attention_workload", ATTENTION / "workload.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = module.CASES["bench"]
    q, k, v = (x.cuda() for x in module.make_inputs(case, seed=0))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
    calls, names = [], []
    for name, source in variants().items():
        model = install(Program(name="variant", source=source)).ModelNew(case["causal"]).cuda()
        got = model(q, k, v)
        err = ((got.float() - want.float()).norm() / want.float().norm()).item()
        print(f"{name}: relative error norm against SDPA {err:.2e}")
        calls.append(lambda m=model: m(q, k, v))
        names.append(name)
    timings = time_calls(calls, 25.0, 400.0, 30)
    print()
    print("command: PYTHONPATH=/tmp/site:src:. python3 benchmarks/attention_operand.py")
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, Triton {triton.__version__}, "
          f"Python {platform.python_version()}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"case: {case}")
    print("| variant | median ms | spread | x run 24's final |")
    print("| --- | --- | --- | --- |")
    base = timings[0].median_ms
    for name, t in zip(names, timings):
        print(f"| {name} | {t.median_ms:.3f} | {t.spread:.3f} | x{base / t.median_ms:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
