"""The wild suite's starts on the CPU (or a GPU: --device cuda), and nothing else: per catalogue entry, does its
self-reference workload load, and does its start pass the gates a bench's start passes on the CPU (compile,
correctness), against the original program computed in its reference process (gates.confined)? What `klineage bench
wild --budget 1` decides before any method runs, without the methods, the check against PyTorch's op and the report
(docs/RESULTS.md#wild). On a GPU a start passes every gate (compile, correctness, profile), as `optimize`'s does.

    KLINEAGE_HOME=DIR KLINEAGE_SEEDS=2 GEMS_VENDOR=nvidia PYTHONPATH=src:.:SITE \\
        python benchmarks/wild_cpu_starts.py --out starts.jsonl [--shard 0/2] [--instances a,b] [--last a,b] \\
        [--device cuda] [--suite wild-quant]

One JSON line per entry, appended as it finishes (an entry already in --out is not run again)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from klineage.bench.suites import WILD_SUITES, wild_catalogue, wild_instances
from klineage.check import check
from klineage.config import Settings
from klineage.gates import GATES
from klineage.sandbox import Sandbox
from klineage.workload import UserError, load_workload

START_GATES = ("compile", "correctness")  # optimize.CANDIDATE_GATES on the CPU


def start_row(inst, settings: Settings, sandbox: Sandbox, device: str = "cpu") -> dict:
    """One entry's load and start verdicts as a JSON-able row."""
    began = time.perf_counter()
    try:
        workload = load_workload(inst.workload)
    except UserError as e:
        return {"instance": inst.name, "load": False, "why": str(e)[:500], "seconds": time.perf_counter() - began}
    report = check(workload, inst.start, settings, device, START_GATES if device == "cpu" else GATES, sandbox)
    failed = next((v for v in report.verdicts if not v.passed), None)
    return {
        "instance": inst.name,
        "load": True,
        "start": "pass" if failed is None else "fail",
        "gate": failed.gate if failed else "",
        "code": failed.code if failed else "",
        "why": failed.reason[:500] if failed else "",
        "seconds": round(time.perf_counter() - began, 1),
        "gate_seconds": {v.gate: round(v.seconds, 1) for v in report.verdicts},
        # the correctness check's trials in order, each one's seconds (a failed check: up to the failing trial)
        "trials": next(
            (
                list(zip(v.evidence.get("trials") or [], v.evidence["trial_seconds"])) or v.evidence["trial_seconds"]
                for v in report.verdicts
                if v.gate == "correctness" and "trial_seconds" in v.evidence
            ),
            [],
        ),
        "device": device,
    }


def run_starts(instances: list, settings: Settings, out: Path, device: str = "cpu", echo: bool = False) -> list[dict]:
    """Start every instance in one warm sandbox, appending each row to ``out`` (JSON lines) as it finishes, so an
    interrupted run keeps what it did."""
    rows = []
    with Sandbox(warm=True) as sandbox:
        for inst in instances:
            row = start_row(inst, settings, sandbox, device)
            line = json.dumps(row)
            if echo:
                print(line, flush=True)
            rows.append(row)
            with out.open("a") as f:
                f.write(line + "\n")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shard", default="0/1", help="I/N: every N-th entry (of --instances) from the I-th")
    parser.add_argument("--instances", default="", help="only these, comma-separated")
    parser.add_argument("--last", default="", help="these run after the others (known to be slow)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--suite", choices=WILD_SUITES, default="wild", help="which wild catalogue")
    args = parser.parse_args()
    settings = Settings.from_env()
    instances, left = wild_instances(settings, wild_catalogue(args.suite))
    done = {json.loads(line)["instance"] for line in args.out.read_text().splitlines()} if args.out.is_file() else set()
    chosen = set(filter(None, args.instances.split(",")))
    last = list(filter(None, args.last.split(",")))
    ordered = [i for i in instances if i.name not in last] + [i for i in instances if i.name in last]
    index, count = (int(n) for n in args.shard.split("/"))
    wanted = [i for i in ordered if not chosen or i.name in chosen]
    mine = [i for n, i in enumerate(wanted) if n % count == index]  # --instances shared out evenly
    print(f"{len(instances)} offered, {len(left)} not offered; this shard runs {len(mine)}", flush=True)
    run_starts([i for i in mine if i.name not in done], settings, args.out, args.device, echo=True)


if __name__ == "__main__":
    main()
