"""Issue 31's CPU acceptance on real KernelBench level-1 files: each file unchanged (its only case full size,
gigabytes of inputs), a Triton program written here (benchmarks/kernelbench/), and `klineage check --device cpu`
timed whole, as a user runs it: the shrunk case it derived, each gate's verdict and seconds.

    git clone https://github.com/ScalingIntelligence/KernelBench /tmp/KernelBench   # not part of this repository
    PYTHONPATH=src python benchmarks/kernelbench_cpu.py --level1 /tmp/KernelBench/KernelBench/level1 [--json OUT]

The files are read from the user's checkout and never copied here."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "kernelbench"
PAIRS = {  # KernelBench level-1 file -> the program written here
    "92_cumsum_exclusive.py": "cumsum_exclusive.py",
    "94_MSELoss.py": "mse_loss.py",
    "96_HuberLoss.py": "huber_loss.py",
    "100_HingeLoss.py": "hinge_loss.py",
}


def check_one(workload: Path, program: Path) -> dict:
    began = time.perf_counter()
    cmd = [sys.executable, "-m", "klineage", "check", str(workload), str(program), "--device", "cpu", "--no-cache"]
    done = subprocess.run([*cmd, "--json"], capture_output=True, text=True)
    seconds = time.perf_counter() - began
    row = {"file": workload.name, "program": program.name, "rc": done.returncode, "seconds": round(seconds, 1)}
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {**row, "error": (done.stderr or done.stdout).strip()[-400:]}
    derived = report.get("derived_case") or {}
    row["sizes"] = derived.get("sizes")
    row["gates"] = {v["gate"]: [v["status"], round(v.get("seconds") or 0.0, 1)] for v in report["verdicts"]}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level1", type=Path, required=True, help="KernelBench/level1 of a KernelBench checkout")
    parser.add_argument("--json", type=Path, help="the rows as JSON lines")
    args = parser.parse_args()
    missing = [name for name in PAIRS if not (args.level1 / name).is_file()]
    if missing:
        sys.exit(f"not in {args.level1}: {', '.join(missing)}")
    import torch
    import triton

    print(f"command: {' '.join(sys.argv)}")
    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; device: cpu ({os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}); torch {torch.__version__}, triton {triton.__version__}, "
          f"python {platform.python_version()}")  # fmt: skip
    rows = []
    for name, program in PAIRS.items():
        row = check_one(args.level1 / name, HERE / program)
        rows.append(row)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps(row) + "\n")
    print(f"{'file':24} {'rc':>3} {'seconds':>8}  {'shrunk to':28} gates (status, s)")
    for r in rows:
        gates = " ".join(f"{g} {s} {t}" for g, (s, t) in r.get("gates", {}).items()) or r.get("error", "")
        print(f"{r['file']:24} {r['rc']:>3} {r['seconds']:>8}  {json.dumps(r.get('sizes')):28} {gates}")


if __name__ == "__main__":
    main()
