"""Where a bench run's time went: per method, the attempts, the wall seconds each took (gates and timing, waits
for a shared GPU included), how many effects were reused from another method of the same instance, the runs'
total seconds, and of an attempt's seconds: its gates, and its timing job (as the caller saw it, and of that the
candidate's start, its setup, both sides' first calls (kernels compiled, autotuners settled; start and settle are
recorded since RESULTS.md#wild-13), the timed first calls beside other jobs, its wait for the GPU alone and its
hold of it, with the hold's total over the method's attempts: a GPU's exclusive time, which every job on it waits
for; and, over both sides of every pair, the host's time to queue a call and the share of repetitions in which the
GPU still waited for that queueing inside the timing, recorded since RESULTS.md#settle; and of a candidate's
correctness check, its trials' seconds and the rest: starting the candidate and reference processes, imports,
inputs);
then, per method, a run's seconds outside its attempts (the start's check, which the first method of an instance
pays and the others reuse; the final pair and profile; the rest: proposing, writing candidates); then, per instance,
the seconds outside the runs (the references job, the escape re-checks).
Reads one or more bench.json reports (a shard's folder or the file). A report, not a test.

    python benchmarks/bench_costs.py REPORT [REPORT ...]"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

from klineage.gates.correctness import CHECK_PHASES
from klineage.trajectory import START_GATE_PHASES


def costs(results: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for result in results:
        for key, t in result["trajectories"].items():
            m = out.setdefault(
                key.rsplit("/", 1)[1],
                {
                    "runs": 0,
                    "seconds": 0.0,
                    "attempts": [],
                    "reused": 0,
                    "check": [],
                    "wait": [],
                    "held": [],
                    "job": [],
                    "start": [],
                    "setup": [],
                    "settle": [],
                    "first": [],
                    "host_launch": [],
                    "launch_bound": [],
                    "trials": [],  # a candidate's correctness check: its trials' seconds, and the rest
                    "around": [],
                    "check_phases": [],  # and the parts of the rest it recorded (correctness PHASES)
                    "phases": [],
                },
            )
            m["runs"] += 1
            m["seconds"] += t.get("seconds") or 0.0
            if t.get("phases"):  # older reports have none (phases came after RESULTS.md#run-18)
                attempts = sum(a.get("seconds") or 0.0 for a in t["attempts"])
                outside = ("start_check_s", "final_s", "refused_checks_s")  # start_<gate>_s are parts of the first
                rest = (t.get("seconds") or 0.0) - attempts - sum(t["phases"].get(k, 0.0) for k in outside)
                m["phases"].append({**t["phases"], "attempts_s": attempts, "rest_s": rest})
            for a in t["attempts"]:
                if "seconds" in a:
                    m["attempts"].append(a["seconds"])
                if "check_seconds" in a:
                    m["check"].append(a["check_seconds"])
                for v in a.get("verdicts", []):
                    if v.get("gate") == "correctness" and "trial_seconds" in v and v.get("seconds"):
                        m["trials"].append(sum(v["trial_seconds"]))
                        m["around"].append(v["seconds"] - sum(v["trial_seconds"]))
                        if v.get("phase_seconds"):
                            m["check_phases"].append(
                                {**v["phase_seconds"], "trials": sum(v["trial_seconds"]), "seconds": v["seconds"]}
                            )
                m["reused"] += bool(a["effect"].get("reused"))
                if a["effect"].get("reused"):
                    continue
                for name, key in (
                    ("wait", "gpu_wait_s"),
                    ("held", "gpu_held_s"),
                    ("job", "job_s"),
                    ("start", "start_s"),
                    ("setup", "setup_s"),
                    ("settle", "settle_s"),
                    ("first", "first_calls_s"),
                ):
                    if key in a["effect"]:
                        m[name].append(a["effect"][key])
                for side in ("current", "candidate"):  # each side's own: both are timed in every pair
                    for name, key in (("host_launch", "host_launch_ms"), ("launch_bound", "launch_bound")):
                        if f"{side}_{key}" in a["effect"]:
                            m[name].append(a["effect"][f"{side}_{key}"])
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    paths = [Path(p) / "bench.json" if Path(p).is_dir() else Path(p) for p in sys.argv[1:]]
    # a shard's log beside its folder, say, is skipped; a report committed under docs/runs is gzipped
    skipped = [p for p in paths if not p.name.endswith((".json", ".json.gz")) or not p.is_file()]
    if skipped:
        print(f"skipped (not a bench.json): {', '.join(map(str, skipped))}", file=sys.stderr)
    paths = [p for p in paths if p not in skipped]
    if not paths:
        raise SystemExit(__doc__)
    results = [json.loads(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_text()) for p in paths]
    print(
        "| method | runs | run seconds (total) | attempts with seconds | s per attempt, median | p80 | "
        "reused effects | gates s, median | timing job s, median | its start s | setup s | settle s | "
        "first calls s | GPU wait s, median | GPU held s, median | GPU held s, total | host ms to queue a call, "
        "median | launch-bound share, median [max] | correctness s: trials, median | outside them, median |"
    )
    print("| --- " * 20 + "|")

    def median(values: list[float]) -> str:  # reports from before a figure was recorded: n/a
        return f"{statistics.median(values):.1f}" if values else "n/a"

    def fine(values: list[float]) -> str:  # figures under a millisecond or a share: three places
        return f"{statistics.median(values):.3f}" if values else "n/a"

    for method, m in costs(results).items():
        a = m["attempts"]
        p80 = f"{_quantile(a, 0.8):.1f}" if a else "n/a"
        bound = f"{fine(m['launch_bound'])} [{max(m['launch_bound']):.2f}]" if m["launch_bound"] else "n/a"
        print(
            f"| {method} | {m['runs']} | {m['seconds']:.0f} | {len(a)} | {median(a)} | {p80} | {m['reused']} | "
            f"{median(m['check'])} | {median(m['job'])} | {median(m['start'])} | {median(m['setup'])} | "
            f"{median(m['settle'])} | {median(m['first'])} | "
            f"{median(m['wait'])} | {median(m['held'])} | {sum(m['held']):.0f} | {fine(m['host_launch'])} | {bound} | "
            f"{median(m['trials'])} | {median(m['around'])} |"
        )
    phased = {method: m["phases"] for method, m in costs(results).items() if m["phases"]}
    if phased:
        print()
        print(
            "| method | runs | attempts s, median | start check s, median | of it: compile s | correctness s | "
            "profile s | final pair and profile s, median | rest s, median | rest s, total |"
        )
        print("| --- " * 10 + "|")
        for method, runs in phased.items():
            keys = ("attempts_s", "start_check_s", "final_s", "rest_s")
            column = {k: [r[k] for r in runs] for k in keys}
            # each gate of the start's check, over the runs that paid for it (an instance's first method)
            gates = [median([r[f"start_{g}_s"] for r in runs if f"start_{g}_s" in r]) for g in START_GATE_PHASES]
            print(
                f"| {method} | {len(runs)} | {median(column['attempts_s'])} | {median(column['start_check_s'])} | "
                f"{' | '.join(gates)} | "
                f"{median(column['final_s'])} | {median(column['rest_s'])} | {sum(column['rest_s']):.0f} |"
            )
    checked = {method: m["check_phases"] for method, m in costs(results).items() if m["check_phases"]}
    if checked:  # recorded since RESULTS.md#timer-wait
        print()
        named = " s | ".join(CHECK_PHASES)
        print(f"| method | candidate checks | seconds, median | trials s | {named} s | none of them s |")
        print("| --- " * (5 + len(CHECK_PHASES)) + "|")
        for method, rows in checked.items():
            parts = [median([r.get(k, 0.0) for r in rows]) for k in ("seconds", "trials", *CHECK_PHASES)]
            unaccounted = [r["seconds"] - r["trials"] - sum(r.get(k, 0.0) for k in CHECK_PHASES) for r in rows]
            print(f"| {method} | {len(rows)} | {' | '.join(parts)} | {median(unaccounted)} |")
    outside = [c for r in results for c in r.get("costs", {}).values()]  # reports from before costs: none
    if outside:
        print()
        print("| per instance, outside the runs | instances | seconds, median | p80 | total |")
        print("| --- | --- | --- | --- | --- |")
        for key, what in (
            ("references_s", "references job (eager, torch.compile, start, expert, finals)"),
            ("escapes_s", "escape re-checks of the finals"),
        ):
            values = [c[key] for c in outside if key in c]
            if values:
                print(
                    f"| {what} | {len(values)} | {median(values)} | {_quantile(values, 0.8):.1f} | {sum(values):.0f} |"
                )


if __name__ == "__main__":
    main()
