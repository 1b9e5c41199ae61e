"""Mine and probe a list of (workload, expert) pairs on one device and report, per lineage: accepted and rejected
steps, the conditions a counterexample backs (a probe that breaks the optimized form: `condition`; or the simple
form, where the optimization is what handles the case: `required`), guard skills (rejected steps) and wall time.

    python benchmarks/mine_all.py [--device auto|cpu|cuda] [--set all|fixtures|examples] [--pair W:E[:mod,...]]
                                  [--library DIR] [--home DIR] [--max-steps N] [--retime] [--walk-device cpu|cuda]
                                  [--json OUT]

Default set `all`: the planted experts of tests/fixtures (planted, probed, hinted) and every non-naive bundled
expert (Liger's through their installed modules, when liger-kernel is installed). `--pair` (repeatable) replaces
the set: `path/workload.py:path/expert.py[:liger_kernel.ops.rms_norm,...]`. Lineages and probes are stored under
the data directory (`--home`, default $KLINEAGE_HOME), so a rerun resumes; skills go to `--library` (default
<home>/library). A report, not a test: nothing is asserted; a pair that fails to mine is a row with its error."""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
LIGER_MODULES = {
    "rmsnorm": "liger_kernel.ops.rms_norm",
    "cross_entropy": "liger_kernel.ops.cross_entropy",
    "swiglu": "liger_kernel.ops.swiglu",
}


def default_pairs(which: str) -> list[tuple[Path, Path, list[str]]]:
    from klineage.cli import bundled_examples

    pairs = []
    if which in ("all", "fixtures"):
        for name in ("planted", "probed", "hinted"):
            if (FIXTURES / name / "expert.py").is_file():
                pairs.append((FIXTURES / name / "workload.py", FIXTURES / name / "expert.py", []))
    if which in ("all", "examples"):
        has_liger = importlib.util.find_spec("liger_kernel") is not None
        for workload, program in bundled_examples():
            if program.stem.startswith("naive"):
                continue
            if program.stem == "liger":
                module = LIGER_MODULES.get(workload.parent.name)
                if not has_liger or module is None:
                    continue
                pairs.append((workload, program, [module]))
            else:
                pairs.append((workload, program, []))
    return pairs


def parse_pair(text: str) -> tuple[Path, Path, list[str]]:
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise SystemExit(f"--pair {text!r}: expected WORKLOAD:EXPERT[:module,module]")
    modules = [m for m in parts[2].split(",") if m] if len(parts) == 3 else []
    return Path(parts[0]), Path(parts[1]), modules


def mine_one(
    workload_path: Path,
    expert_path: Path,
    modules: list[str],
    settings,
    device: str,
    sandbox,
    library,
    max_steps: int | None,
    retime: bool = False,
    walk_device: str | None = None,
) -> tuple[dict, list]:
    """One lineage into `library` (klineage.mining.mine_into: the walk on `walk_device`, default `device`, retime,
    skills, probes, skills again). (row, skills); a failure is a row with `error`."""
    from klineage.mining import mine_into
    from klineage.program import load_program, with_installed_modules
    from klineage.workload import load_workload

    label = f"{workload_path.parent.name}/{expert_path.stem}"
    started = time.perf_counter()
    row = {"lineage": label, "workload": str(workload_path), "expert": str(expert_path), "modules": modules}
    mined_at = []
    try:
        workload = load_workload(workload_path)
        expert = with_installed_modules(load_program(expert_path), modules)

        def on_phase(text: str) -> None:
            if text.startswith("probing"):
                mined_at.append(time.perf_counter() - started)

        lineage, _, skills = mine_into(
            library,
            workload,
            expert,
            settings,
            device,
            walk_device,
            retime=retime,
            sandbox=sandbox,
            max_steps=max_steps,
            on_phase=on_phase,
        )
    except Exception as e:  # a report: one broken pair must not hide the others
        row.update(error=f"{type(e).__name__}: {str(e)[:300]}", wall_s=time.perf_counter() - started)
        return row, []
    mined_s = mined_at[0] if mined_at else time.perf_counter() - started
    backed = [
        {
            "skill": s.id,
            "transform": s.transform["id"],
            "predicate": f["violated"],
            "breaks": f["breaks"],
            "code": f["code"],
            "case": f["case"],
        }
        for s in skills
        if s.kind == "optimization"
        for f in s.failures
    ]
    statuses: dict[str, int] = {}
    for s in skills:
        for c in s.conditions:
            statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    row.update(
        id=lineage.id,
        finished=lineage.finished,
        accepted=len(lineage.accepted),
        rejected=len(lineage.rejected),
        backed=backed,
        guards=[{"skill": s.id, "code": s.failures[0]["code"]} for s in skills if s.kind == "guard"],
        condition_statuses=statuses,
        mine_s=mined_s,
        wall_s=time.perf_counter() - started,
    )
    return row, skills


def report(rows: list[dict], stamp: dict) -> str:
    lines = [
        f"command: `{stamp['command']}`  ",
        f"device: {stamp['device']}  ",
        f"versions: {stamp['versions']}  ",
        f"date: {stamp['date']}",
        "",
        "| lineage | accepted | rejected | counterexample-backed conditions | guard skills | wall s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['lineage']} | error: {r['error']} | | | | {r['wall_s']:.0f} |")
            continue
        kind = {"optimized": "condition", "simple": "required"}
        backed = (
            ", ".join(f"{b['transform']}:{b['predicate']} ({kind[b['breaks']]}, {b['code']})" for b in r["backed"])
            or "none"
        )
        lines.append(
            f"| {r['lineage']} | {r['accepted']} | {r['rejected']} | {backed} | {len(r['guards'])} | "
            f"{r['wall_s']:.0f} |"
        )
    ok = [r for r in rows if "error" not in r]
    skills_backed = {b["skill"] for r in ok for b in r["backed"]}
    lines += [
        "",
        f"counterexample-backed conditions: {sum(len(r['backed']) for r in ok)} on {len(skills_backed)} "
        f"skills; guard skills: {sum(len(r['guards']) for r in ok)}; lineages: {len(ok)} mined, "
        f"{len(rows) - len(ok)} failed",
    ]
    predicates = sorted({b["predicate"] for r in ok for b in r["backed"]})
    lines.append(f"predicates with a counterexample: {', '.join(predicates) or 'none'}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--set", dest="which", choices=["all", "fixtures", "examples"], default="all")
    parser.add_argument("--pair", action="append", default=[], help="WORKLOAD:EXPERT[:module,...] (repeatable)")
    parser.add_argument("--library", type=Path, help="skill library directory (default <home>/library)")
    parser.add_argument("--home", type=Path, help="data directory (default $KLINEAGE_HOME)")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--retime", action="store_true", help="time the recorded steps' effects again (GPU)")
    parser.add_argument(
        "--walk-device",
        choices=["cpu", "cuda"],
        default=None,
        help="where the walk's gates ran (default --device): cpu with --device cuda takes the "
        "finished walks made without a GPU, times their steps and probes on the GPU",
    )
    parser.add_argument("--json", type=Path, help="also write the rows and the stamp as JSON")
    args = parser.parse_args()

    from klineage.check import resolve_device
    from klineage.config import Settings, device_name, versions
    from klineage.library import Library
    from klineage.sandbox import Sandbox

    device = resolve_device(args.device)
    settings = Settings.from_env(**({"data_dir": args.home} if args.home else {}))
    pairs = [parse_pair(p) for p in args.pair] if args.pair else default_pairs(args.which)
    rows = []
    stamp = {
        "command": "python " + " ".join(sys.argv),
        "device": device_name(device),
        "versions": versions(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    with Sandbox(warm=settings.warm) as sandbox, Library(args.library or settings.data_dir / "library") as library:
        for workload, expert, modules in pairs:
            print(f"mining {workload.parent.name}/{expert.stem} on {device} ...", file=sys.stderr, flush=True)
            row, _ = mine_one(
                workload,
                expert,
                modules,
                settings,
                device,
                sandbox,
                library,
                args.max_steps,
                args.retime,
                args.walk_device,
            )
            rows.append(row)
            done = row.get("error") or f"{row['accepted']} accepted, {len(row['backed'])} backed conditions"
            print(f"  {done} ({row['wall_s']:.0f} s)", file=sys.stderr, flush=True)
            if args.json:  # after every pair: a run stopped at a deadline keeps the lineages it finished
                args.json.write_text(json.dumps({"stamp": stamp, "rows": rows}, indent=2, default=str))
    print(report(rows, stamp))


if __name__ == "__main__":
    main()
