"""How long does a timer wait for the GPU alone while checks run beside it on the same GPU? Two arms, one after
the other: checks that hold their shared turn for their whole job (KLINEAGE_TURNS=job, as before 00381e5), and
checks that let a waiting timer measure between two trials (the default). Each arm runs CHECKS threads of
correctness checks and TIMERS threads of pair timings of one held-out naive program for SECONDS, every thread with
its own warm sandbox, all through one lock file, as a bench's shards do. Per arm: checks and timings finished, the
timers' wait for the GPU alone (median and p80), a timing job's and a check's seconds (median).

    python benchmarks/gpu_turns.py [--instance layernorm] [--checks 8] [--timers 3] [--seconds 75] [--json OUT]

A report, not a test. Needs a GPU."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELD = ROOT / "src" / "klineage" / "suites" / "heldout"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_arm(turns: str, request, program, checks: int, timers: int, seconds: float) -> dict:
    from klineage.gates import run_gate
    from klineage.sandbox import Job, Sandbox

    os.environ["KLINEAGE_TURNS"] = turns  # inherited by the warm servers made below, and so by every job
    deadline = time.monotonic() + seconds
    checked, timed, failures = [], [], []

    def check_loop() -> None:
        with Sandbox(warm=True) as sb:
            while time.monotonic() < deadline:
                began = time.perf_counter()
                verdict = run_gate("correctness", request, sb)
                if verdict.status != "pass":
                    failures.append(f"check: {verdict.code} {verdict.reason[:120]}")
                checked.append(time.perf_counter() - began)

    def timer_loop() -> None:
        with Sandbox(warm=True) as sb:
            while time.monotonic() < deadline:
                began = time.perf_counter()
                result = sb.run(Job("klineage.gates:profile_pair_job", (request, program),
                                    env={"KLINEAGE_DEVICE": "cuda"}, timeout_s=300))  # fmt: skip
                if not result.ok:
                    failures.append(f"timing: {result.error[:120]}")
                    continue
                timed.append({"job_s": time.perf_counter() - began, **{k: result.value[k] for k in
                              ("gpu_wait_s", "gpu_held_s", "first_calls_s", "setup_s")}})  # fmt: skip

    threads = [threading.Thread(target=check_loop) for _ in range(checks)]
    threads += [threading.Thread(target=timer_loop) for _ in range(timers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    waits = [t["gpu_wait_s"] for t in timed]
    return {
        "turns": turns,
        "checks": len(checked),
        "timings": len(timed),
        "wait_median_s": statistics.median(waits) if waits else None,
        "wait_p80_s": _quantile(waits, 0.8) if waits else None,
        "held_median_s": statistics.median(t["gpu_held_s"] for t in timed) if timed else None,
        "timing_job_median_s": statistics.median(t["job_s"] for t in timed) if timed else None,
        "check_median_s": statistics.median(checked) if checked else None,
        "failures": failures[:5],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instance", default="layernorm")
    parser.add_argument("--checks", type=int, default=8)
    parser.add_argument("--timers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=75.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch
    import triton

    if not torch.cuda.is_available():
        print("no GPU: nothing is timed (this report needs one)")
        return
    from klineage.config import Settings
    from klineage.gates import GateRequest
    from klineage.program import load_program

    os.environ.setdefault("KLINEAGE_SEED_CASE", "tiny")  # as the bench's shards run
    os.environ["KLINEAGE_GPU_LOCK"] = str(Path(tempfile.mkdtemp()) / "gpu0.lock")
    folder = HELD / args.instance
    program = load_program(folder / "naive.py")
    request = GateRequest(str(folder / "workload.py"), program, "cuda", Settings.from_env())
    print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
    print(f"device: {torch.cuda.get_device_name()}, {os.cpu_count()} host cores; torch {torch.__version__}, "
          f"triton {triton.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; "
          f"{args.instance}, {args.checks} check threads, {args.timers} timer threads, {args.seconds:g} s per arm")
    arms = [run_arm(turns, request, program, args.checks, args.timers, args.seconds) for turns in ("job", "yield")]

    def f(v) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    print("| turns | checks done | timings done | timer wait s, median | p80 | held s, median | timing job s, median "
          "| check s, median |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for a in arms:
        print(f"| {a['turns']} | {a['checks']} | {a['timings']} | {f(a['wait_median_s'])} | {f(a['wait_p80_s'])} | "
              f"{f(a['held_median_s'])} | {f(a['timing_job_median_s'])} | {f(a['check_median_s'])} |")
    for a in arms:
        for failure in a["failures"]:
            print(f"{a['turns']}: {failure}")
    if args.json:
        args.json.write_text(json.dumps({"arms": arms, "argv": sys.argv[1:]}, indent=1))


if __name__ == "__main__":
    main()
