"""A bench run's numbers: per instance and method a `Row`; per method, what the rows sum up to (geometric means,
fast_1, escapes, evaluations to 95%, memory-bound instances at the roofline target)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

# issue 4's acceptance line for memory-bound kernels: the bench report counts, per suite, who ends at or above it
ROOFLINE_TARGET = 0.85


@dataclass(frozen=True)
class Row:
    """One method's result on one instance, as the bench run measured it (bench.run writes them)."""

    instance: str
    method: str
    speedup: float | None  # final over start, timed side by side
    expert_fraction: float | None  # expert time / final time
    roofline_fraction: float | None
    vs_torch_compile: float | None  # torch.compile time / final time
    evaluations: int
    evaluations_to_95: int | None
    failed_share: float
    kept: int
    refusals: int
    escapes: list[dict]
    seconds: float
    stop: str
    best_hash: str
    commit: str = ""  # the code that made this row (a report resumed or merged across commits says which)
    unchecked: list[dict] = field(default_factory=list)  # escape re-checks that could not run (`Recheck`)
    bound: str | None = None  # "memory" or "compute": what sets the bench case's roofline (the profile gate's)
    # every gain timed again before it was kept (optimize._confirmed): candidate, first and confirmed speedup, kept
    confirmations: list[dict] = field(default_factory=list)
    # final over start timed again after the methods, in a fresh process (bench.run._retime); None: not re-timed
    retimed_speedup: float | None = None


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def credited(row: Row) -> Row:
    """The row as the summary counts it: a final program that escaped (wrong on hidden seeds or probe cases) is no
    result, so the method is credited with its start (x1.0, and the start's fractions). Memory's autotune list on
    the naive softmax, x1.87 with half the bench case's rows wrong, had raised its geometric mean by 2.2% (H200, run
    20). The per-instance table still shows what was measured, with the escape beside it."""
    if not row.escapes or not row.speedup:
        return row
    return replace(
        row,
        speedup=1.0,
        retimed_speedup=1.0 if row.retimed_speedup else None,
        evaluations_to_95=None,
        **{
            f: getattr(row, f) / row.speedup if getattr(row, f) else getattr(row, f)
            for f in ("expert_fraction", "roofline_fraction", "vs_torch_compile")
        },
    )


def summarize(rows: list[Row], methods: list[str], trajectories: dict | None = None, budget: int = 0) -> dict:
    out = {}
    escaped = {(r.instance, r.method) for r in rows if r.escapes}
    rows = [credited(r) for r in rows]
    for method in methods:
        mine = [r for r in rows if r.method == method]
        to95 = [r.evaluations_to_95 for r in mine if r.evaluations_to_95]
        out[method] = {
            "instances": len(mine),
            "geomean_speedup": geomean([r.speedup for r in mine if r.speedup]),
            "geomean_expert_fraction": geomean([r.expert_fraction for r in mine if r.expert_fraction]),
            "geomean_vs_torch_compile": geomean([r.vs_torch_compile for r in mine if r.vs_torch_compile]),
            "mean_roofline_fraction": _mean([r.roofline_fraction for r in mine if r.roofline_fraction]),
            "mean_evaluations_to_95": _mean(to95),
            "mean_failed_share": _mean([r.failed_share for r in mine]),
            "fast_1": _mean([1.0 if (r.speedup or 0) > 1.0 else 0.0 for r in mine]),
            "escapes": sum(bool(r.escapes) for r in mine),
            "unchecked": sum(bool(r.unchecked) for r in mine),
            "memory_bound_at_target": at_roofline_target(mine),
        }
    if "klineage" in methods:
        out["klineage"]["paired_evaluations_to_95"] = {
            other: paired_evaluations(rows, "klineage", other) for other in methods if other != "klineage"
        }
    if trajectories:
        for method, found in to_instance_best(trajectories, methods, budget, escaped=escaped).items():
            out[method]["evaluations_to_95_of_best"] = found
    return out


def at_roofline_target(rows: list[Row]) -> dict:
    """Per suite (the instance name's prefix), the memory-bound instances whose final program reached
    ROOFLINE_TARGET of the roofline, and the fraction of each that did not. Rows without a bound (not timed, or
    written before rows carried it) are left out."""
    out: dict[str, dict] = {}
    for r in rows:
        if r.bound != "memory":
            continue
        suite_name, _, name = r.instance.rpartition(":")
        group = out.setdefault(suite_name, {"instances": 0, "reached": 0, "under": {}})
        group["instances"] += 1
        if (r.roofline_fraction or 0.0) >= ROOFLINE_TARGET:
            group["reached"] += 1
        else:
            group["under"][name] = r.roofline_fraction
    return out


def kept_log_speedups(trajectory: dict) -> list[tuple[int, float]]:
    """(evaluation, log-speedup of the kept programs so far) after each kept step measured in the run."""
    out, total = [], 0.0
    for a in trajectory.get("attempts", []):
        effect = a.get("effect") or {}
        if a.get("kept") and effect.get("measured") and effect.get("speedup"):
            total += math.log(effect["speedup"])
            out.append((a["evaluation"], total))
    return out


def to_instance_best(
    trajectories: dict, methods: list[str], budget: int, fraction: float = 0.95, escaped: set | frozenset = frozenset()
) -> dict:
    """Per method, the gate evaluations it spent until its kept steps reached `fraction` of the best log-speedup
    any method reached on the instance, over the instances some method improved. A method that never reached it
    counts budget + 1, as does one whose final program escaped ((instance, method) in `escaped`), which sets no
    target either. Evaluations to 95% of a method's *own* final result reward a method that keeps one small
    step early and nothing after (memory 2.7, as few as KLineage's 2.7, with a final result 16% lower in geometric
    mean: RESULTS.md#run-19); a common target per instance does not."""
    curves: dict[str, dict[str, list]] = {}
    for key, t in trajectories.items():
        instance, _, method = key.rpartition("/")
        if method in methods and t.get("timed"):
            curves.setdefault(instance, {})[method] = [] if (instance, method) in escaped else kept_log_speedups(t)
    spent: dict[str, list[int]] = {m: [] for m in methods}
    for by_method in curves.values():
        best = max((c[-1][1] for c in by_method.values() if c), default=0.0)
        if best <= 0 or set(by_method) != set(methods):
            continue
        for method, curve in by_method.items():
            spent[method].append(next((e for e, v in curve if v >= fraction * best), budget + 1))
    return {
        m: {"instances": len(v), "reached": sum(e <= budget for e in v), "mean": _mean(v)} for m, v in spent.items()
    }


def paired_evaluations(rows: list[Row], a: str, b: str) -> dict:
    """Mean evaluations to 95% of the final result of `a` and of `b` over the instances where both improved: the
    per-method mean leaves out the instances a method did not improve, so a method that improves more instances,
    some late, can look slower than one that improved few."""
    by = {(r.instance, r.method): r.evaluations_to_95 for r in rows}
    both = [(by[(i, a)], by[(i, b)]) for i in sorted({r.instance for r in rows}) if by.get((i, a)) and by.get((i, b))]
    return {"instances": len(both), a: _mean([x for x, _ in both]), b: _mean([y for _, y in both])}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def suite_shares(result: dict) -> dict:
    """Per suite (an instance name's prefix before `:`, else the run's one suite), what issue 31's wild suite
    reports: of the kernels offered, the share that loads and the share whose start is correct (each rejection
    with its class, bench.rejections); per method, the share of started instances it improved, the geometric mean
    of its final speedups (an escape credited x1.0), mean evaluations to 95%, escapes; and, where the final
    programs were re-timed in a fresh process, the geometric mean of those re-times and the worst ratio of a
    reported speedup to its re-time (the one furthest from 1, either way)."""
    rows = [credited(Row(**r)) for r in result.get("rows", [])]
    rejections = result.get("rejections", {})
    skipped = result.get("skipped", {})
    cut = set(result["stamp"].get("unfinished", ()))
    groups: dict[str, list[str]] = {}
    for name in result["stamp"].get("suite", result["stamp"]["instances"]):
        groups.setdefault(name.rpartition(":")[0], []).append(name)
    out = {}
    for suite_name, names in groups.items():
        offered = len(names)
        loaded = [n for n in names if rejections.get(n, {}).get("stage") != "load"]
        ran = set(result["stamp"]["instances"])
        started = [n for n in loaded if n in ran and n not in skipped]
        # a cut run's instances it never finished: neither started correct nor rejected, so not in the share's base
        # (a partial H200 run read "5 start correct (62%)" with 3 instances cut and none rejected)
        unfinished = [n for n in names if n in cut and n not in ran]
        decided = offered - len(unfinished)
        classes: dict[str, int] = {}
        for n in names:
            if n in rejections:
                classes[rejections[n]["class"]] = classes.get(rejections[n]["class"], 0) + 1
        methods = {}
        for method in result["stamp"]["methods"]:
            mine = [r for r in rows if r.method == method and r.instance in started]
            ratios = [(r.instance, r.speedup / r.retimed_speedup) for r in mine if r.speedup and r.retimed_speedup]
            worst = max(ratios, key=lambda t: abs(math.log(t[1])), default=None)
            methods[method] = {
                "instances": len(mine),
                "improved_share": _mean([1.0 if (r.speedup or 0) > 1.0 else 0.0 for r in mine]),
                "geomean_speedup": geomean([r.speedup for r in mine if r.speedup]),
                "geomean_retimed_speedup": geomean([r.retimed_speedup for r in mine if r.retimed_speedup]),
                "mean_evaluations_to_95": _mean([r.evaluations_to_95 for r in mine if r.evaluations_to_95]),
                "escapes": sum(bool(r.escapes) for r in mine),
                "retimed": len(ratios),
                "worst_reported_over_retimed": None if worst is None else {"instance": worst[0], "ratio": worst[1]},
            }
        checks = [result.get("checks", {})[n] for n in names if n in result.get("checks", {})]
        out[suite_name or "run"] = {
            "offered": offered,
            "checked_against_pytorch": len(checks),
            "pass_against_pytorch": sum(c["status"] == "pass" for c in checks),
            "not_offered": len(result.get("not_offered", {})) if not suite_name else 0,
            "loaded": len(loaded),
            "started": len(started),
            "load_share": len(loaded) / offered if offered else None,
            "start_share": len(started) / decided if decided else None,
            "unfinished": len(unfinished),
            "rejections": classes,
            "methods": methods,
        }
    return out
