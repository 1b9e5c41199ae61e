"""Does the profile gate agree with `triton.testing.do_bench`? Times the bundled naive and tuned matmul (bf16
8192^3, milliseconds) and softmax and RMSNorm (memory-bound, tens to hundreds of microseconds, where a launch's host
overhead would show) both ways in one process, and prints the ceilings the gate measured.

    python benchmarks/profile_vs_do_bench.py [--json OUT]

Agreement: the two medians differ by no more than the larger of the two measured spreads (p20-p80 half-width)
plus 2%. GPU only."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

from klineage.check import ceilings_for
from klineage.config import Settings, device_name, versions
from klineage.gates import GateRequest, run_gate
from klineage.program import install, load_program
from klineage.sandbox import GpuTurns, Sandbox, gpu_turn, take_turns
from klineage.workload import import_file, load_workload, make_case_inputs

EXAMPLES = Path(__file__).resolve().parent.parent / "src" / "klineage" / "examples"


def do_bench_ms(workload_path: Path, program_path: Path) -> tuple[float, float, float]:
    import torch
    import triton

    module = import_file(workload_path, "wl")
    case = module.CASES["bench"]
    inputs = [x.cuda() for x in make_case_inputs(module, case, 0)]
    model = install(load_program(program_path)).ModelNew()
    with torch.no_grad(), gpu_turn(exclusive=True):  # alone on the GPU, as the gate's timing job is
        p50, p20, p80 = triton.testing.do_bench(lambda: model(*inputs), warmup=100, rep=1000, quantiles=(0.5, 0.2, 0.8))
    return p50, p20, p80


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    for folder in ("matmul", "softmax", "rmsnorm"):
        load_workload(EXAMPLES / folder / "workload.py")  # a malformed workload fails here, before any GPU time
    rows = []
    with tempfile.TemporaryDirectory() as home, Sandbox(warm=True) as sandbox:
        lock = Settings.from_env().gpu_lock  # beside bench shards (h200_eval.sh): their GPU's lock
        settings = Settings(data_dir=Path(home), use_cache=False, profile_rep_ms=1000, gpu_lock=lock)
        take_turns(GpuTurns.of(settings))  # do_bench's own timing, in this process, takes turns too
        ceilings = ceilings_for("cuda", settings, sandbox, None)
        for folder, name in [(f, n) for f in ("matmul", "softmax", "rmsnorm") for n in ("naive", "tuned")]:
            wl_path = EXAMPLES / folder / "workload.py"
            program = load_program(EXAMPLES / folder / f"{name}.py")
            request = GateRequest(str(wl_path), program, "cuda", settings, ceilings=ceilings)
            verdict = run_gate("profile", request, sandbox)
            if not verdict.passed:
                print(f"{folder}/{name}: profile gate {verdict.status}: {verdict.reason}")
                continue
            gate = verdict.metrics
            p50, p20, p80 = do_bench_ms(wl_path, EXAMPLES / folder / f"{name}.py")
            db_spread = (p80 - p20) / (2 * p50)
            allowed = max(gate["spread"], db_spread) + 0.02
            diff = abs(gate["median_ms"] - p50) / p50
            rows.append(
                {
                    "program": f"{folder}/{name}",
                    "gate_ms": gate["median_ms"],
                    "gate_spread": gate["spread"],
                    "do_bench_ms": p50,
                    "do_bench_spread": db_spread,
                    "rel_diff": diff,
                    "agree": diff <= allowed,
                    "tflops": gate.get("achieved_tflops"),
                    "tbps": gate.get("achieved_tbps"),
                    "roofline_fraction": gate.get("roofline_fraction"),
                    "eager_ms": gate["eager_median_ms"],
                }
            )
    stamp = {
        "command": "python " + " ".join(sys.argv),
        "device": device_name("cuda"),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    print(
        f"command: `{stamp['command']}`  \ndevice: {stamp['device']}  \nversions: {stamp['versions']}  \n"
        f"date: {stamp['date']}\n"
    )
    print(
        "ceilings measured by the gate: "
        + ", ".join(f"{k}={v / 1e12:.3g}T" for k, v in ceilings.items() if isinstance(v, float))
    )
    print(
        "\n| program (bench case) | profile gate ms (spread) | do_bench ms (spread) | diff | agree | TFLOP/s | "
        "TB/s | roofline | eager ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    num = lambda v, fmt: format(v, fmt) if v is not None else "n/a"
    for r in rows:
        print(
            f"| {r['program']} | {r['gate_ms']:.4f} (±{r['gate_spread']:.1%}) | {r['do_bench_ms']:.4f} "
            f"(±{r['do_bench_spread']:.1%}) | {r['rel_diff']:.1%} | {r['agree']} | {num(r['tflops'], '.0f')} | "
            f"{num(r['tbps'], '.2f')} | {num(r['roofline_fraction'], '.2f')} | {r['eager_ms']:.4f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"stamp": stamp, "ceilings": ceilings, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
