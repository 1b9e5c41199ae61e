"""Does a busy host inflate the profile gate's times? Times three held-out naive programs (one and two launches per
call, 0.16 to 0.69 ms) with klineage.timing.time_calls on an idle host and with every core spinning in busy-loop
processes (twice as many as cores: a bench's shards compiling). The timer queues each call behind its L2 flush, so
the host's launch path is hidden as long as it takes less than the flush (about 0.13 ms on the H200).

    python benchmarks/timer_under_load.py [--json OUT]

A report, not a test. Needs a GPU."""

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
    args = parser.parse_args()
    import torch
    import triton

    if not torch.cuda.is_available():
        print("no GPU: nothing is timed (this report needs one)")
        return
    from klineage.config import versions
    from klineage.program import install, load_program
    from klineage.timing import time_calls
    from klineage.workload import import_file

    print(f"command: `python benchmarks/{Path(__file__).name}`")
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
    rows = []
    for load in ("idle", "busy"):
        spinners = []
        if load == "busy":
            spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(2 * (os.cpu_count() or 1))]
            for p in spinners:
                p.start()
        try:
            for name, call in calls.items():
                (t,) = time_calls([call])
                rows.append(
                    {
                        "program": name,
                        "host": load,
                        "median_ms": t.median_ms,
                        "p20_ms": t.p20_ms,
                        "p80_ms": t.p80_ms,
                        "reps": t.reps,
                    }
                )
                print(rows[-1], flush=True)
        finally:
            for p in spinners:
                p.kill()
    print()
    print("| program | idle ms (p20-p80) | busy ms (p20-p80) | busy / idle |")
    print("| --- | --- | --- | --- |")
    for name in PROGRAMS:
        idle, busy = (next(r for r in rows if r["program"] == name and r["host"] == h) for h in ("idle", "busy"))
        print(
            f"| {name} | {idle['median_ms']:.4f} ({idle['p20_ms']:.4f}-{idle['p80_ms']:.4f}) | "
            f"{busy['median_ms']:.4f} ({busy['p20_ms']:.4f}-{busy['p80_ms']:.4f}) | "
            f"{busy['median_ms'] / idle['median_ms']:.3f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"versions": versions(), "rows": rows}, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
