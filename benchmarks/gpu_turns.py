"""How long does a timer wait for the GPU alone while checks run beside it on the same GPU? Two arms, one after
the other: checks that hold their shared turn for their whole job (KLINEAGE_TURNS=job, as before 00381e5), and
checks that let a waiting timer measure between two trials (the default). Each arm runs CHECKS threads of
correctness checks and TIMERS threads of pair timings of one held-out naive program for SECONDS, every thread with
its own warm sandbox, all through one lock file, as a bench's shards do. Per arm: checks and timings finished, the
timers' wait for the GPU alone (median and p80), a timing job's and a check's seconds (median).

    python benchmarks/gpu_turns.py [--instance layernorm] [--checks 8] [--timers 3] [--seconds 75] [--json OUT]
    python benchmarks/gpu_turns.py --simulate [--shards 12] [--seconds 60]

A report, not a test. Needs a GPU, except --simulate: the lock protocol alone, on this machine, with SHARDS processes
that sleep where a bench shard's attempt would work (a check: TRIALS trials of TRIAL_S seconds, +-25%, under its
shared turn; then a timing job: SETUP_S of setup, then HOLD_S with the GPU alone), sized after run 17 (H200, 12 shards:
checks of 10-15 s, measurements of 0.3 s). It models the waiting, not a GPU."""

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


TRIALS, TRIAL_S, SETUP_S, HOLD_S = 6, 2.0, 2.0, 0.3


def _simulated_shard(path: str, turns: str, deadline: float, out) -> None:
    """A bench shard's attempts, modelled: a check (TRIALS x TRIAL_S under a shared turn, yielding between trials),
    then a timing job (SETUP_S under a shared turn, then HOLD_S alone), again and again."""
    import random

    os.environ.update(KLINEAGE_GPU_LOCK=path, KLINEAGE_TURNS=turns)
    from klineage.sandbox import exclusive_turn, gpu_turn, yield_turn

    time.sleep(random.uniform(0, TRIALS * TRIAL_S))  # shards out of step, as they are after their first instance
    while time.time() < deadline:
        began = time.time()
        with gpu_turn(exclusive=False):
            for _ in range(TRIALS):
                yield_turn()
                time.sleep(random.uniform(0.75, 1.25) * TRIAL_S)
        checked = time.time()
        with gpu_turn(exclusive=False):
            time.sleep(SETUP_S)
            asked = time.time()
            with exclusive_turn():
                waited = time.time() - asked
                time.sleep(HOLD_S)
        if time.time() < deadline:
            out.put((checked - began, time.time() - checked, waited, time.time() - began))


def simulate_arm(turns: str, shards: int, seconds: float) -> dict:
    import multiprocessing

    path = str(Path(tempfile.mkdtemp()) / "gpu0.lock")
    out = multiprocessing.Queue()
    deadline = time.time() + seconds
    procs = [multiprocessing.Process(target=_simulated_shard, args=(path, turns, deadline, out))
             for _ in range(shards)]  # fmt: skip
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    done = []
    while not out.empty():
        done.append(out.get())
    return {
        "turns": turns,
        "attempts": len(done),
        "check_median_s": statistics.median(d[0] for d in done) if done else None,
        "timing_job_median_s": statistics.median(d[1] for d in done) if done else None,
        "wait_median_s": statistics.median(d[2] for d in done) if done else None,
        "wait_p80_s": _quantile([d[2] for d in done], 0.8) if done else None,
        "attempt_median_s": statistics.median(d[3] for d in done) if done else None,
    }


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
    parser.add_argument("--simulate", action="store_true", help="the lock protocol alone, without a GPU")
    parser.add_argument("--shards", type=int, default=12, help="--simulate: bench shards sharing the GPU")
    args = parser.parse_args()
    if args.simulate:
        print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
        print(f"simulated on {os.cpu_count()} host cores, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC: "
              f"{args.shards} shards, each attempt a check of {TRIALS} x {TRIAL_S:g} s and a timing of {SETUP_S:g} s "
              f"setup and {HOLD_S:g} s alone; {args.seconds:g} s per arm; no GPU")
        arms = [simulate_arm(t, args.shards, args.seconds) for t in ("job", "yield")]
        print("| turns | attempts done | attempt s, median | check s, median | timing job s, median | "
              "timer wait s, median | p80 |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for a in arms:
            print(f"| {a['turns']} | {a['attempts']} | " + " | ".join(
                "n/a" if a[k] is None else f"{a[k]:.2f}" for k in ("attempt_median_s", "check_median_s",
                "timing_job_median_s", "wait_median_s", "wait_p80_s")) + " |")  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps({"arms": arms, "argv": sys.argv[1:]}, indent=1))
        return
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
    _report([run_arm(t, request, program, args.checks, args.timers, args.seconds) for t in ("job", "yield")], args.json)


def _report(arms: list[dict], json_path: Path | None) -> None:
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
    if json_path:
        json_path.write_text(json.dumps({"arms": arms, "argv": sys.argv[1:]}, indent=1))


if __name__ == "__main__":
    main()
