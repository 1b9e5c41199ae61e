"""Does a busy host inflate the profile gate's times? Times three held-out naive programs (one and two launches per
call, 0.16 to 0.69 ms), one of them again behind 0.3 ms of host work (a library's wrapper), and with `--wild` wild
instances' starts (FlagGems's wrappers and tuners), with klineage.timing.time_calls on an idle host and with every
core spinning in busy-loop processes (twice as many as cores: a bench's shards compiling); each with the timer's
device-side wait in front of a call slow to queue (RESULTS.md#settle) and without it, side by side. The timer queues
each call behind its L2 flush, so the host's launch path is hidden as long as it takes less than the flush (about
0.13 ms on the H200); the wait hides a longer one.

    python benchmarks/timer_under_load.py [--wild gems_min_dim,gems_addmv] [--json OUT]

A report, not a test. Needs a GPU (and for `--wild` the wild suite's packages on the path)."""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELD = ROOT / "src" / "klineage" / "suites" / "heldout"
PROGRAMS = ["row_argmax", "mse_loss", "layernorm"]


def _spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--wild", default="", help="comma-separated wild instances whose starts are timed too")
    args = parser.parse_args()
    import torch
    import triton

    if not torch.cuda.is_available():
        print("no GPU: nothing is timed (this report needs one)")
        return
    from klineage import timing
    from klineage.config import versions
    from klineage.program import install, load_program
    from klineage.timing import time_calls
    from klineage.workload import import_file

    print(f"command: `{' '.join(['python', f'benchmarks/{Path(__file__).name}', *sys.argv[1:]])}`")
    print(
        f"device: {torch.cuda.get_device_name()}, {os.cpu_count()} host cores; torch {torch.__version__}, "
        f"triton {triton.__version__}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    calls = {}
    for name in PROGRAMS:
        workload = import_file(HELD / name / "workload.py", f"wl_{name}")
        model = install(load_program(HELD / name / "naive.py")).ModelNew().cuda()
        inputs = [t.cuda() for t in workload.make_inputs(workload.CASES["bench"], seed=0)]
        calls[name] = (lambda m, x: lambda: m(*x))(model, inputs)
    calls["layernorm behind 0.3 ms"] = (lambda call: lambda: (_host_work(0.3e-3), call())[1])(calls["layernorm"])
    calls.update(_wild_calls([n for n in args.wild.split(",") if n]))
    waits_from = timing.LAUNCH_WAIT_FROM_MS
    rows = []
    for load in ("idle", "busy"):
        spinners = []
        if load == "busy":
            spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(2 * (os.cpu_count() or 1))]
            for p in spinners:
                p.start()
        try:
            for name, call in calls.items():
                for wait in ("wait", "no wait"):  # side by side: the same call, the same host load
                    timing.LAUNCH_WAIT_FROM_MS = waits_from if wait == "wait" else float("inf")
                    (t,) = time_calls([call])
                    rows.append(
                        {
                            "program": name,
                            "host": load,
                            "timer": wait,
                            "median_ms": t.median_ms,
                            "p20_ms": t.p20_ms,
                            "p80_ms": t.p80_ms,
                            "reps": t.reps,
                            "host_launch_ms": t.host_launch_ms,
                            "launch_bound": t.launch_bound,
                        }
                    )
                    print(rows[-1], flush=True)
        finally:
            timing.LAUNCH_WAIT_FROM_MS = waits_from
            for p in spinners:
                p.kill()
    print()
    print(
        "| program | timer | idle ms (p20-p80) | busy ms (p20-p80) | busy / idle | host ms to queue, busy | "
        "launch-bound, busy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in calls:
        for wait in ("wait", "no wait"):
            idle, busy = (
                next(r for r in rows if r["program"] == name and r["host"] == h and r["timer"] == wait)
                for h in ("idle", "busy")
            )
            print(
                f"| {name} | {wait} | {idle['median_ms']:.4f} ({idle['p20_ms']:.4f}-{idle['p80_ms']:.4f}) | "
                f"{busy['median_ms']:.4f} ({busy['p20_ms']:.4f}-{busy['p80_ms']:.4f}) | "
                f"{busy['median_ms'] / idle['median_ms']:.3f} | {busy['host_launch_ms']:.3f} | "
                f"{busy['launch_bound']:.2f} |"
            )
    if args.json:
        args.json.write_text(json.dumps({"versions": versions(), "rows": rows}, indent=2))


def _host_work(seconds: float) -> None:
    """Host time spent before a launch, as a library's wrapper spends it (a spin: sleep is too coarse)."""
    import time

    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def _wild_calls(names: list[str]) -> dict:
    """Each wild instance's start, built on its bench case's first input set, as a call."""
    import tempfile

    import torch

    from klineage.bench.suites import suite
    from klineage.config import Settings
    from klineage.gates.common import build, input_set
    from klineage.program import install
    from klineage.workload import import_file, load_workload, make_case_init_inputs

    if not names:
        return {}
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="klineage-timer-")))
    found = {i.name: i for i in suite("wild", settings) if i.name in names}
    calls = {}
    for name in names:
        instance = found[name]  # a name not in the suite: KeyError, said at once
        workload = load_workload(instance.workload)
        wl_module = import_file(Path(instance.workload), f"wl_{name}")
        case = workload.cases[workload.bench_case()]
        model = build(install(instance.start).ModelNew, make_case_init_inputs(wl_module, case)).cuda()
        inputs = input_set(wl_module, case, 0, "cuda")

        def call(model=model, inputs=inputs):
            with torch.no_grad():
                return model(*inputs)

        call()  # its kernels compiled and its tuners settled before anything is timed
        calls[name] = call
    return calls


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
