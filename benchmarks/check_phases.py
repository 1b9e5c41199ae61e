"""Where a wild start's correctness check spends its seconds: the check run N times per instance (the verdict cache
off) in one warm sandbox, each verdict's `phase_seconds` (candidate_start, reference_start, workload, static_scan)
and its trials' seconds, one JSON line per check, then a table of medians. Run it against two trees side by side
(PYTHONPATH) to compare them: RESULTS.md#greet.

    GEMS_VENDOR=nvidia KLINEAGE_SEEDS=2 KLINEAGE_HOME=$(mktemp -d) PYTHONPATH=SITE:src:. \\
        python benchmarks/check_phases.py gems_sum_dim,gems_min_dim,gems_softmax [--reps 3] [--device cpu]

A report, not a test. On the CPU the program runs in Triton's interpreter, as the bench's CPU starts do."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> None:
    from klineage.bench.suites import wild_instances
    from klineage.check import check
    from klineage.config import Settings, device_name, versions
    from klineage.gates.correctness import CHECK_PHASES
    from klineage.sandbox import Sandbox
    from klineage.suites import wild
    from klineage.workload import load_workload

    parser = argparse.ArgumentParser()
    parser.add_argument("instances")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"command: `{' '.join(['python', f'benchmarks/{Path(__file__).name}', *sys.argv[1:]])}`")
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"device: {device_name(args.device)}, {os.cpu_count()} host cores; {versions()}; {stamp}", flush=True)
    names = set(args.instances.split(","))
    settings = dataclasses.replace(Settings(), use_cache=False)
    instances, _ = wild_instances(settings, tuple(k for k in wild.catalogue() if k.name in names))
    rows = []
    with Sandbox() as sandbox:
        first = instances[0]  # the warm server's own start, not any check's
        check(load_workload(first.workload), first.start, settings, args.device, ("correctness",), sandbox=sandbox)
        for rep in range(args.reps):
            for inst in instances:
                began = time.perf_counter()
                report = check(
                    load_workload(inst.workload), inst.start, settings, args.device, ("correctness",), sandbox=sandbox
                )
                verdict = report.verdicts[0]
                rows.append(
                    {
                        "instance": inst.name,
                        "rep": rep,
                        "status": verdict.status,
                        "call_s": round(time.perf_counter() - began, 2),
                        "verdict_s": round(verdict.seconds, 2),
                        "trials_s": round(sum(verdict.evidence.get("trial_seconds", [])), 2),
                        "phases": verdict.evidence.get("phase_seconds", {}),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    print()
    print(f"| instance | checks | call s, median (min-max) | trials s | {' s | '.join(CHECK_PHASES)} s |")
    print("| --- " * (4 + len(CHECK_PHASES)) + "|")
    for inst in instances:
        mine = [r for r in rows if r["instance"] == inst.name]
        calls = [r["call_s"] for r in mine]
        parts = [statistics.median(r["phases"].get(k, 0.0) for r in mine) for k in CHECK_PHASES]
        print(
            f"| {inst.name} | {len(mine)} | {statistics.median(calls):.2f} ({min(calls):.2f}-{max(calls):.2f}) | "
            f"{statistics.median(r['trials_s'] for r in mine):.2f} | {' | '.join(f'{p:.2f}' for p in parts)} |"
        )


if __name__ == "__main__":
    main()
