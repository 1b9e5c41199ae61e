"""Issue 31's GPU comparison over every bench run so far, on the CPU: per wild instance, the newest timed report in
which every method finished it, and what those rows sum up to.

No single device session has fitted the whole wild suite (64 instances across `wild` and `wild-quant`; about 18 of
them fill a 25-minute pipeline), so each run measured a part. This reads the committed reports (`bench.json` or
`bench.json.gz`, a run's merged shards), keeps for each instance the rows of the newest report (by its stamp's date)
that has a row from every method asked, and sums them up with the bench's own rules (`bench.metrics`: an escape
credited x1.0, geometric means over the re-timed final speedups where a re-time exists, evaluations to 95% of the
instance's best). Rows from different commits and GPU kinds are joined: the table says which each came from, and
the summary counts them by device, so a reader sees what the mixture is. Nothing is timed here.

    PYTHONPATH=src python benchmarks/wild_ledger.py docs/runs [--methods klineage,blind,autotune] [--device H100]
        [--commit C] [--json] [--queue-order SUITE [--instances A,B]]

`--device TEXT` reads only reports whose device names TEXT (one GPU kind's ledger, each instance's newest row on it);
`--commit C` only reports made at commit C (a suite run in parts over sessions at one commit: h200_wild.sh TREE=).
`--queue-order SUITE` prints SUITE's instances (wild or wild-quant) as `--instances` takes them, longest first by the
seconds their newest report spent on them (every method's run, the references, the escapes re-check): a bench queue
hands instances out in the order given, so the longest start first and the run's tail is short; an instance no report
has timed is costed at the upper quartile of those that were (unknown cost is more often high: a first compile).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections import Counter
from pathlib import Path

from klineage.bench.metrics import Row, credited, geomean, to_instance_best

WILD_PREFIXES = ("gems_", "ao_", "bnb_", "tk_", "liger_", "fla_")


def load(path: Path) -> dict:
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as f:
        return json.load(f)


def reports(root: Path, device: str = "", commit: str = "") -> list[tuple[Path, dict]]:
    """Every timed bench report under root (on a device whose name holds `device`, at a commit starting `commit`,
    where given), oldest first by its stamp's date (a merged report and the parts it was merged from both count: the
    same rows, the later date wins a tie by path order, which changes nothing)."""
    found = []
    for path in sorted(root.rglob("bench*.json*")):
        if not path.name.endswith((".json", ".json.gz")):
            continue
        try:
            result = load(path)
        except (OSError, ValueError):
            continue
        stamp = result.get("stamp") or {}
        if not stamp.get("timed") or "cpu" == str(stamp.get("device", "")).lower():
            continue
        if device and device.lower() not in str(stamp.get("device", "")).lower():
            continue
        if commit and not str(stamp.get("commit", "")).startswith(commit):
            continue
        found.append((path, result))
    return sorted(found, key=lambda pr: (pr[1]["stamp"].get("date", ""), str(pr[0])))


def newest_rows(found: list[tuple[Path, dict]], methods: list[str]) -> dict[str, dict]:
    """instance -> {path, stamp, rows (method -> Row), trajectories} from the newest report with every method."""
    out: dict[str, dict] = {}
    for path, result in found:
        by: dict[str, dict[str, Row]] = {}
        for r in result.get("rows", []):
            if r["method"] in methods and r["instance"].startswith(WILD_PREFIXES):
                by.setdefault(r["instance"], {})[r["method"]] = Row(**r)
        for instance, rows in by.items():
            if set(rows) == set(methods):
                trajectories = {
                    f"{instance}/{m}": result.get("trajectories", {}).get(f"{instance}/{m}", {}) for m in methods
                }
                out[instance] = {"path": path, "stamp": result["stamp"], "rows": rows, "trajectories": trajectories}
    return out


def final(row: Row) -> float | None:
    """The row's final speedup as the summary credits it: the fresh-process re-time where there is one."""
    row = credited(row)
    return row.retimed_speedup or row.speedup


def ledger(root: Path, methods: list[str], device: str = "", commit: str = "") -> dict:
    found = reports(root, device, commit)
    newest = newest_rows(found, methods)
    started = {i: e for i, e in newest.items() if all(final(r) for r in e["rows"].values())}
    trajectories = {k: v for e in started.values() for k, v in e["trajectories"].items()}
    budget = max((e["stamp"].get("budget") or 0 for e in started.values()), default=0)
    best = to_instance_best(trajectories, methods, budget)
    summary = {}
    for m in methods:
        rows = [e["rows"][m] for e in started.values()]
        ratios = [(r.instance, r.speedup / r.retimed_speedup) for r in rows if r.speedup and r.retimed_speedup]
        worst = max(ratios, key=lambda t: abs(math.log(t[1])), default=None)
        summary[m] = {
            "instances": len(rows),
            "geomean_final": geomean([final(r) for r in rows]),
            "improved": sum((final(r) or 0) > 1.0 for r in rows),
            "escapes": sum(bool(r.escapes) for r in rows),
            "evaluations_to_95_of_best": best.get(m),
            "worst_reported_over_retimed": None if worst is None else {"instance": worst[0], "ratio": worst[1]},
        }
    return {
        "reports_read": len(found),
        "instances": len(newest),
        "started": len(started),
        "not_started": sorted(set(newest) - set(started)),
        "devices": dict(Counter(str(e["stamp"].get("device")) for e in started.values())),
        "commits": dict(Counter(str(e["stamp"].get("commit")) for e in started.values())),
        "summary": summary,
        "table": [
            {
                "instance": i,
                "report": str(e["path"]),
                "device": e["stamp"].get("device"),
                "commit": e["stamp"].get("commit"),
                "date": e["stamp"].get("date"),
                **{m: final(e["rows"][m]) for m in methods},
                **{f"{m}_evaluations_to_95": e["rows"][m].evaluations_to_95 for m in methods},
            }
            for i, e in sorted(started.items())
        ],
    }


def cost_seconds(found: list[tuple[Path, dict]]) -> dict[str, float]:
    """instance -> the seconds its newest report spent on it (rows' seconds and the report's per-instance costs)."""
    out: dict[str, float] = {}
    for _path, result in found:
        spent: Counter = Counter()
        for r in result.get("rows", []):
            spent[r["instance"]] += r.get("seconds") or 0.0
        for instance, costs in (result.get("costs") or {}).items():
            spent[instance] += sum(v for v in costs.values() if isinstance(v, (int, float)))
        out.update({i: s for i, s in spent.items() if s > 0})
    return out


def queue_order(names: list[str], costs: dict[str, float]) -> list[str]:
    """names longest first by costs; one never timed at the upper quartile of those timed (the given order on ties)."""
    known = sorted(costs[n] for n in names if n in costs)
    unknown = known[(3 * len(known)) // 4] if known else 0.0
    return sorted(names, key=lambda n: -costs.get(n, unknown))


def _f(v, spec=".3f") -> str:
    return "n/a" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a folder of bench reports (docs/runs)")
    parser.add_argument("--methods", default="klineage,blind,autotune")
    parser.add_argument("--device", default="", help="only reports from a device whose name holds this")
    parser.add_argument("--commit", default="", help="only reports made at this commit (a suite split over sessions)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--queue-order", metavar="SUITE", help="print SUITE's instances longest first, and stop")
    parser.add_argument("--instances", default="", help="with --queue-order: only these (comma-separated)")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"error: {args.root} is not a folder", file=sys.stderr)
        return 2
    if args.queue_order:
        from klineage.bench.suites import wild_catalogue

        names = [k.name for k in wild_catalogue(args.queue_order)]
        if args.instances:
            wanted = set(args.instances.split(","))
            names = [n for n in names if n in wanted]
        print(",".join(queue_order(names, cost_seconds(reports(args.root, args.device)))))
        return 0
    methods = args.methods.split(",")
    out = ledger(args.root, methods, args.device, args.commit)
    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return 0
    print(f"# {' '.join(sys.argv)}")
    print(
        f"reports read: {out['reports_read']}; instances with every method: {out['instances']}, "
        f"started correct: {out['started']} (not: {', '.join(out['not_started']) or 'none'})"
    )
    print("devices: " + ", ".join(f"{d} {n}" for d, n in out["devices"].items()))
    print("commits: " + ", ".join(f"{c} {n}" for c, n in out["commits"].items()))
    print()
    print("| instance | device | commit | " + " | ".join(methods) + " |")
    print("|---|---|---|" + "---|" * len(methods))
    for t in out["table"]:
        if any((t[m] or 1.0) != 1.0 for m in methods):
            cells = " | ".join(f"x{_f(t[m])} ({t[f'{m}_evaluations_to_95'] or '-'})" for m in methods)
            print(f"| {t['instance']} | {str(t['device']).replace('NVIDIA ', '')} | {t['commit']} | {cells} |")
    quiet = sum(all((t[m] or 1.0) == 1.0 for m in methods) for t in out["table"])
    print(f"| {quiet} more, every method x1.000 | | | " + " | ".join("" for _ in methods) + " |")
    print()
    print(
        "| method | instances | geomean final | improved | evaluations to 95% of best (reached) | escapes | "
        "worst reported / re-timed |"
    )
    print("|---|---|---|---|---|---|---|")
    for m, s in out["summary"].items():
        e = s["evaluations_to_95_of_best"] or {}
        w = s["worst_reported_over_retimed"]
        print(
            f"| {m} | {s['instances']} | x{_f(s['geomean_final'], '.4f')} | {s['improved']} | "
            f"{_f(e.get('mean'), '.2f')} ({e.get('reached', 0)} of {e.get('instances', 0)}) | {s['escapes']} | "
            f"{'n/a' if w is None else _f(w['ratio']) + ' ' + w['instance']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
