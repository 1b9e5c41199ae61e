"""What a timed pair costs with and without the current program's autotuner choices given (RESULTS.md#settle).

For each wild instance named: the start's profile (its autotuners tune, as a user's run: the choices it reports),
then timed pairs of the start against a neutral child (the start and a constant nothing reads: the same kernels),
alternately without the choices (the parent tunes again) and with them (gates.autotune.SettledTuners), each pair
its own candidate process as in a walk (`check.time_pair`). Prints per pair the job's seconds, its settle seconds
(both sides' first calls), the speedup (x1 expected: a neutral child), and which kernels were given or pinned.
A report, not a test.

    PYTHONPATH=SITE:src:. python3 benchmarks/pair_settle.py gems_addmv gems_bmm [--rounds 2] [--json OUT]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", nargs="+")
    parser.add_argument("--suite", default="wild")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of (without, with) the choices")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import torch
    import triton

    from klineage.bench.suites import suite
    from klineage.check import check, time_pair
    from klineage.config import Settings
    from klineage.program import Program
    from klineage.sandbox import Sandbox
    from klineage.workload import load_workload

    if not torch.cuda.is_available():
        print("pair_settle: no GPU: nothing timed", file=sys.stderr)
        return 2
    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="klineage-settle-")))
    found = {i.name: i for i in suite(args.suite, settings) if i.name in args.instances}
    missing = [n for n in args.instances if n not in found]
    if missing:
        print(f"pair_settle: not in suite {args.suite}: {', '.join(missing)}", file=sys.stderr)
        return 2
    print(f"command: {' '.join(sys.argv)}")
    print(
        f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, Triton {triton.__version__}, "
        f"Python {platform.python_version()}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    rows: list[dict] = []
    with Sandbox(warm=settings.warm) as sandbox:
        for name in args.instances:
            instance = found[name]
            workload = load_workload(instance.workload)
            start = instance.start
            child = Program(f"{start.name}-neutral", start.source + "\nNEUTRAL = 16  # read by nothing\n")
            profile = check(workload, start, settings, "cuda", ("profile",), sandbox).verdict("profile")
            choices = (profile.metrics.get("autotuned") if profile is not None else None) or None
            print(
                f"{name}: the start's profile {'passed' if profile and profile.passed else 'failed'}; "
                f"choices for {sorted(choices) if choices else 'no kernel'}"
            )
            for round_ in range(args.rounds):
                for given in (None, choices):
                    timed = time_pair(workload, start, child, settings, "cuda", sandbox, parent_choices=given)
                    v = timed.value if timed.ok else {}
                    rows.append(
                        {
                            "instance": name,
                            "round": round_,
                            "given": given is not None,
                            "ok": timed.ok,
                            "error": timed.error[:300] if not timed.ok else "",
                            **{k: v.get(k) for k in ("job_s", "start_s", "setup_s", "settle_s", "speedup")},
                            "given_kernels": v.get("given"),
                            "pinned": v.get("pinned"),
                        }
                    )
                    r = rows[-1]
                    print(f"  round {round_}, choices {'given' if r['given'] else 'not given'}: {json.dumps(r)}")
    print("\n| instance | choices | pairs | job s, median [min, max] | settle s, median [min, max] | speedup |")
    print("|---|---|---|---|---|---|")
    for name in args.instances:
        for given in (False, True):
            mine = [r for r in rows if r["instance"] == name and r["given"] == given and r["ok"]]
            if not mine:
                print(f"| {name} | {'given' if given else 'tuned'} | 0 | n/a | n/a | n/a |")
                continue

            def spread(key: str, mine: list[dict] = mine) -> str:
                xs = [r[key] for r in mine if r[key] is not None]
                return f"{statistics.median(xs):.1f} [{min(xs):.1f}, {max(xs):.1f}]" if xs else "n/a"

            speedups = ", ".join(f"x{1 / r['speedup']:.3f}" for r in mine if r["speedup"])
            print(
                f"| {name} | {'given' if given else 'tuned'} | {len(mine)} | {spread('job_s')} | "
                f"{spread('settle_s')} | {speedups} |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
