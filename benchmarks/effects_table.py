"""The measured effect of every step of the lineages under one or more data directories, as a Markdown table:
parent and child medians with their spreads (relative half-width of the p20-p80 band), the speedup the optimization
buys (parent time / child time: what undoing it costs) and whether it exceeds the noise. A report, not a test.

    python benchmarks/effects_table.py DATA_DIR [DATA_DIR ...]

Reads steps.jsonl, so walks stopped before their end (a deadline) are shown with what they recorded."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(home: Path) -> list[str]:
    out = []
    for steps_file in sorted(home.glob("lineages/*/steps.jsonl")):
        lineage = steps_file.parent.name
        finished = (steps_file.parent / "lineage.json").is_file() and json.loads(
            (steps_file.parent / "lineage.json").read_text()
        ).get("finished")
        for line in steps_file.read_text().splitlines():
            try:
                step = json.loads(line)
            except json.JSONDecodeError:
                break
            e = step.get("effect") or {}
            where = f"{step['transform']} @ {step['site'].get('function')}"
            if not step["accepted"]:
                bad = next((v for v in step["verdicts"] if v["status"] != "pass"), {})
                out.append(f"| {lineage} | {step['index']} | {where} | rejected: {bad.get('code', '?')} | | | | |")
                continue
            if not e.get("measured"):
                out.append(
                    f"| {lineage} | {step['index']} | {where} | accepted | not timed: {e.get('why', '')} | | | |"
                )
                continue
            out.append(
                f"| {lineage}{'' if finished else ' (unfinished)'} | {step['index']} | {where} | accepted | "
                f"{e['parent_ms']:.4f} ms ±{e['parent_spread']:.1%} | {e['child_ms']:.4f} ms "
                f"±{e['child_spread']:.1%} | x{e['speedup']:.3f} | {'yes' if e.get('significant') else 'no'} |"
            )
    return out


def main() -> None:
    homes = [Path(p) for p in sys.argv[1:]]
    if not homes:
        raise SystemExit(__doc__)
    print(
        "| lineage | step | optimization @ function | verdict | with it (expert side) | without it | speedup | "
        "beyond noise |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for home in homes:
        for row in rows(home):
            print(row)


if __name__ == "__main__":
    main()
