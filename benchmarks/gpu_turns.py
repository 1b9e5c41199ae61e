"""How long does a timer wait for the GPU alone while checks run beside it on the same GPU, and how many attempts
do a bench's shards finish? One arm per way of holding a check's turn (KLINEAGE_TURNS, config.TURN_HOLDS), one
after the other, ROUNDS times in turn: `job` (a check holds its shared turn for its whole job, as before 00381e5),
`yield` (it lets a waiting timer measure between two trials, as before host_work) and `work` (also while its
processes import the program and compile, and an autotuner compiles its configurations before it takes the GPU
alone: the default). Each arm runs SHARDS threads for SECONDS, every thread with its own warm sandbox and all through
one lock file, as a bench's shards do; each thread's attempt is a correctness check of one program (a held-out naive
program, or with --wild a wild suite instance's start, whose FlagGems import takes seconds), then a pair timing of
it against itself. One attempt before the arms warms the caches, uncounted. Per arm: attempts finished, and the
median seconds of an attempt, its check, its timing job, the timer's wait for the GPU alone (with its p80) and its
hold, and the timed pair's speedup (the program against itself: 1 but for noise) at its 10th and 90th
percentiles, which says whether letting other jobs' host work run beside a measurement made it noisier.

    python benchmarks/gpu_turns.py [--instance layernorm | --wild NAME] [--arms job,yield,work] [--rounds 1] \
        [--fresh] [--shards 12] [--seconds 90] [--json OUT]
    python benchmarks/gpu_turns.py --simulate [--arms job,yield,work] [--host-s 0] [--trial-s 2] [--shards 12] \
        [--seconds 180]

A report, not a test. Needs a GPU, except --simulate: the lock protocol alone, on this machine, with SHARDS processes
that sleep where a bench shard's attempt would work (a check: HOST_S of host work, then TRIALS trials of TRIAL_S
seconds, +-25%, under its shared turn; then a timing job: HOST_S of host work, SETUP_S of setup, then HOLD_S with the
GPU alone), sized after RESULTS.md#run-17 (H200, 12 shards: checks of 10-15 s, measurements of 0.3 s; HOST_S 0) or
RESULTS.md#h100-starts (H100: a check's trials 2.7-6.7 s of 7-30 s, the rest starting processes and compiling). It
models the waiting, not a GPU.

On the H200 (RESULTS.md#run-18: layernorm, 12 shards, 90 s per arm, before the input cache was set here): 48
attempts in each arm, the timers' wait 3.66 s (job) and 3.51 s (yield), median. There the checks were not what kept a
timer waiting; the model's gain did not appear."""

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


def _simulated_shard(path: str, turns: str, deadline: float, out, model: dict) -> None:
    """A bench shard's attempts, modelled: a check (HOST_S of host work: its candidate's start and compiles; then
    TRIALS x TRIAL_S under a shared turn, yielding between trials), then a timing job (HOST_S of host work, SETUP_S
    under a shared turn, then HOLD_S alone), again and again."""
    import random

    from klineage.sandbox import GpuTurns, exclusive_turn, gpu_turn, host_work, take_turns, yield_turn

    take_turns(GpuTurns(path, hold=turns))
    trials, trial_s, host_s = model["trials"], model["trial_s"], model["host_s"]

    time.sleep(random.uniform(0, trials * trial_s + host_s))  # shards out of step, as after their first instance
    while time.time() < deadline:
        began = time.time()
        with gpu_turn(exclusive=False):
            with host_work():
                time.sleep(random.uniform(0.75, 1.25) * host_s)
            for _ in range(trials):
                yield_turn()
                time.sleep(random.uniform(0.75, 1.25) * trial_s)
        checked = time.time()
        with gpu_turn(exclusive=False):
            with host_work():
                time.sleep(random.uniform(0.75, 1.25) * host_s)
            time.sleep(SETUP_S)
            asked = time.time()
            with exclusive_turn():
                waited = time.time() - asked
                time.sleep(HOLD_S)
        if time.time() < deadline:
            out.put((checked - began, time.time() - checked, waited, HOLD_S, time.time() - began))


def simulate_arm(turns: str, shards: int, seconds: float, model: dict) -> dict:
    import multiprocessing

    path = str(Path(tempfile.mkdtemp()) / "gpu0.lock")
    out = multiprocessing.Queue()
    deadline = time.time() + seconds
    procs = [
        multiprocessing.Process(target=_simulated_shard, args=(path, turns, deadline, out, model))
        for _ in range(shards)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    done = []
    while not out.empty():
        done.append(out.get())
    return _arm(turns, done, [])


def run_arm(turns: str, request, program, shards: int, seconds: float, fresh: bool = False) -> dict:
    """SHARDS threads, each with its own warm sandbox, each doing a bench shard's attempts on the GPU: a correctness
    check of the program, then a pair timing of it against itself, until SECONDS are over. `fresh`: each attempt's
    program a new one (a comment of its own), so its kernel cache starts empty and every kernel compiles, as a
    bench's candidates do."""
    import uuid
    from dataclasses import replace

    from klineage.gates import run_gate
    from klineage.sandbox import GpuTurns, Job, Sandbox

    request = replace(request, settings=request.settings.replace(gpu_turns=turns))  # every job's
    deadline = time.monotonic() + seconds
    done, failures = [], []

    def shard() -> None:
        with Sandbox(warm=True) as sb:
            while time.monotonic() < deadline:
                began = time.perf_counter()
                prog = replace(program, source=f"{program.source}\n# attempt {uuid.uuid4()}\n") if fresh else program
                req = replace(request, program=prog)
                verdict = run_gate("correctness", req, sb)
                checked = time.perf_counter()
                result = sb.run(
                    Job(
                        "klineage.gates.profile:profile_pair_job",
                        (req, prog),
                        timeout_s=300,
                        device="cuda",
                        turns=GpuTurns.of(request.settings),
                    )
                )
                if verdict.status != "pass" or not result.ok:
                    failures.append(f"{verdict.code} {verdict.reason[:100]} / {result.error[:100]}")
                    continue
                if time.monotonic() < deadline:
                    done.append(
                        (
                            checked - began,
                            time.perf_counter() - checked,
                            result.value["gpu_wait_s"],
                            result.value["gpu_held_s"],
                            time.perf_counter() - began,
                            result.value["speedup"],
                        )
                    )

    threads = [threading.Thread(target=shard) for _ in range(shards)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return _arm(turns, done, failures)


def _arm(turns: str, done: list[tuple], failures: list[str]) -> dict:
    """One arm's figures from its attempts: (check s, timing job s, timer wait s, held s, attempt s[, speedup])."""

    def median(i: int) -> float | None:
        return statistics.median(d[i] for d in done) if done else None

    return {
        "turns": turns,
        "attempts": len(done),
        "attempt_median_s": median(4),
        "check_median_s": median(0),
        "timing_job_median_s": median(1),
        "wait_median_s": median(2),
        "wait_p80_s": _quantile([d[2] for d in done], 0.8) if done else None,
        "held_median_s": median(3),
        "speedup_p10": _quantile([d[5] for d in done], 0.1) if done and len(done[0]) > 5 else None,
        "speedup_p90": _quantile([d[5] for d in done], 0.9) if done and len(done[0]) > 5 else None,
        "failures": failures[:5],
    }


def _report(arms: list[dict], json_path: Path | None) -> None:
    print(
        "| turns | attempts done | attempt s, median | check s, median | timing job s, median | "
        "timer wait s, median | p80 | held s, median | self speedup p10 | p90 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    keys = (
        "attempt_median_s",
        "check_median_s",
        "timing_job_median_s",
        "wait_median_s",
        "wait_p80_s",
        "held_median_s",
        "speedup_p10",
        "speedup_p90",
    )
    for a in arms:
        print(
            f"| {a['turns']} | {a['attempts']} | "
            + " | ".join(
                "n/a" if a[k] is None else f"{a[k]:.3f}" if k.startswith("speedup") else f"{a[k]:.2f}" for k in keys
            )
            + " |"
        )
    for a in arms:
        for failure in a["failures"]:
            print(f"{a['turns']}: {failure}")
    if json_path:
        json_path.write_text(json.dumps({"arms": arms, "argv": sys.argv[1:]}, indent=1))


def shard_env() -> None:
    """This process's environment as a bench shard's on one GPU: fresh seeds on the tiny case, the input cache (drawing
    bench-sized inputs on the CPU is not what is compared here) and a lock file of its own."""
    os.environ.setdefault("KLINEAGE_SEED_CASE", "tiny")
    os.environ.setdefault("KLINEAGE_INPUT_CACHE", str(Path(tempfile.gettempdir()) / "klineage-inputs"))
    os.environ["KLINEAGE_GPU_LOCK"] = str(Path(tempfile.mkdtemp()) / "gpu0.lock")


def held_out_request(instance: str):
    """A GPU gate request for a held-out instance's naive program, and the program."""
    from klineage.config import Settings
    from klineage.gates import GateRequest
    from klineage.program import load_program

    folder = HELD / instance
    program = load_program(folder / "naive.py")
    return GateRequest(str(folder / "workload.py"), program, "cuda", Settings.from_env()), program


def wild_request(name: str):
    """A GPU gate request for a wild suite instance's start (its own reference), and the start."""
    from klineage.bench.suites import wild_instances
    from klineage.config import Settings
    from klineage.gates import GateRequest

    settings = Settings.from_env()
    instances, _ = wild_instances(settings)
    inst = next((i for i in instances if i.name == name), None)
    if inst is None:
        raise SystemExit(f"no wild instance {name!r} offered here (is its package installed?)")
    return GateRequest(str(inst.workload), inst.start, "cuda", settings), inst.start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instance", default="layernorm")
    parser.add_argument("--wild", default="", help="a wild suite instance instead of a held-out one")
    parser.add_argument("--arms", default="job,yield,work", help="the turn holds compared, in this order")
    parser.add_argument("--rounds", type=int, default=1, help="the arms run this many times in turn")
    parser.add_argument("--fresh", action="store_true", help="each attempt a new program: every kernel compiles")
    parser.add_argument("--shards", type=int, default=12, help="bench shards sharing the GPU")
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--simulate", action="store_true", help="the lock protocol alone, without a GPU")
    parser.add_argument("--host-s", type=float, default=0.0, help="--simulate: host work per check and timing job")
    parser.add_argument("--trial-s", type=float, default=TRIAL_S, help="--simulate: seconds of one trial")
    args = parser.parse_args()
    if args.simulate:
        model = {"trials": TRIALS, "trial_s": args.trial_s, "host_s": args.host_s}
        print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
        print(
            f"simulated on {os.cpu_count()} host cores, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC: "
            f"{args.shards} shards, each attempt a check of {args.host_s:g} s host work and {TRIALS} x "
            f"{args.trial_s:g} s trials, and a timing of {args.host_s:g} s host work, {SETUP_S:g} s setup and "
            f"{HOLD_S:g} s alone; {args.seconds:g} s per arm; no GPU"
        )
        arms = [a for a in args.arms.split(",") if a]
        _report([simulate_arm(t, args.shards, args.seconds, model) for t in arms], args.json)
        return
    import torch
    import triton

    if not torch.cuda.is_available():
        print("no GPU: nothing is timed (this report needs one)")
        return
    shard_env()
    request, program = wild_request(args.wild) if args.wild else held_out_request(args.instance)
    arms = [a for a in args.arms.split(",") if a]
    print(f"command: `python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}`")
    print(
        f"device: {torch.cuda.get_device_name()}, {os.cpu_count()} host cores; torch {torch.__version__}, "
        f"triton {triton.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; "
        f"{args.wild or args.instance}, {args.shards} shards, {args.seconds:g} s per arm, {args.rounds} round(s)"
        + (", each attempt a fresh program" if args.fresh else "")
    )
    run_arm(arms[0], request, program, 1, 1.0)  # warm-up, not counted: the kernel cache filled, FlagGems's own too
    results = []
    for _ in range(args.rounds):
        for t in arms:
            results.append(run_arm(t, request, program, args.shards, args.seconds, args.fresh))
            print(json.dumps(results[-1]), flush=True)  # each arm as it ends: a run cut short keeps what finished
    _report(results, args.json)


if __name__ == "__main__":
    main()
