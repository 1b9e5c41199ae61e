"""What the gates cost: seconds per candidate for each gate, on the CPU (cold process and warm worker) and, where a
GPU is visible, on the GPU (warm worker, all three gates). Candidates are the bundled example programs.

    python benchmarks/gate_cost.py [--device cpu|cuda] [--repeat 3] [--json OUT]

Prints a Markdown table with the command, device, versions and date. A benchmark, not a test: no speed target is
asserted here."""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

from klineage.check import check
from klineage.cli import bundled_examples
from klineage.config import Settings, device_name, versions
from klineage.program import load_program
from klineage.sandbox import Sandbox
from klineage.workload import load_workload


def measure(device: str, warm: bool, repeat: int, gates: tuple[str, ...], only: str | None = None) -> dict:
    """Per gate: wall seconds per candidate (the whole sandboxed evaluation as the caller sees it)."""
    import tempfile

    rows: dict[str, list[float]] = {g: [] for g in gates}
    failures = []
    pairs = [(w, p) for w, p in bundled_examples() if "liger" not in p.stem or _has_liger()]
    pairs = [(w, p) for w, p in pairs if only is None or w.parent.name == only]
    with tempfile.TemporaryDirectory() as home, Sandbox(warm=warm) as sandbox:
        settings = Settings(data_dir=Path(home), use_cache=False, warm=warm)
        started = time.perf_counter()
        if warm:  # start both servers outside the measurement: a long run pays this once
            check(load_workload(pairs[0][0]), load_program(pairs[0][1]), settings, device, gates, sandbox)
        startup = time.perf_counter() - started
        for _ in range(repeat):
            for wl_path, prog_path in pairs:
                wl, prog = load_workload(wl_path), load_program(prog_path)
                for gate in gates:
                    t0 = time.perf_counter()
                    report = check(wl, prog, settings, device, (gate,), sandbox)
                    rows[gate].append(time.perf_counter() - t0)
                    print(
                        f"{device} {'warm' if warm else 'cold'} {wl.name}/{prog.name} {gate}: {rows[gate][-1]:.2f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    verdict = report.verdicts[0]
                    if verdict.status not in ("pass", "skip"):
                        failures.append(f"{wl.name}/{prog.name} {gate}: {verdict.code} {verdict.reason[:200]}")
    return {
        "device": device,
        "warm": warm,
        "candidates": len(pairs),
        "repeat": repeat,
        "first_call_s": startup,
        "per_gate": {
            g: {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "n": len(v)}
            for g, v in rows.items()
            if v
        },
        "failures": failures,
    }


def _has_liger() -> bool:
    import importlib.util

    return importlib.util.find_spec("liger_kernel") is not None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="one bundled workload (softmax, rmsnorm, matmul)")
    args = parser.parse_args()
    results = []
    if args.device == "cpu":
        for warm in (False, True):
            results.append(measure("cpu", warm, args.repeat, ("compile", "correctness"), args.only))
    else:
        results.append(measure("cuda", True, args.repeat, ("compile", "correctness", "profile"), args.only))
    stamp = {
        "command": "python " + " ".join(sys.argv),
        "device": device_name(args.device),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    print(
        f"command: `{stamp['command']}`  \ndevice: {stamp['device']}  \nversions: {stamp['versions']}  \n"
        f"date: {stamp['date']}\n"
    )
    print("| device | worker | gate | median s/candidate | min | max | evaluations |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        for gate, s in r["per_gate"].items():
            worker = "warm" if r["warm"] else "cold"
            print(
                f"| {r['device']} | {worker} | {gate} | {s['median_s']:.2f} | {s['min_s']:.2f} | {s['max_s']:.2f} | "
                f"{s['n']} |"
            )
    for r in results:
        if r["warm"]:
            print(f"\nwarm worker start-up (first candidate, all gates, {r['device']}): {r['first_call_s']:.1f} s")
        for f in r["failures"]:
            print(f"FAILED: {f}")
    if args.json:
        args.json.write_text(json.dumps({"stamp": stamp, "results": results}, indent=2))


if __name__ == "__main__":
    main()
