"""A bench run's report: Markdown (the summary table, the notes a reader needs to weigh it, the rows), plots, and
the JSON beside them."""

from __future__ import annotations

import json
import math
from pathlib import Path

from klineage.bench.metrics import ROOFLINE_TARGET
from klineage.bench.references import EAGER_OF_PYTORCH, REFERENCE_SPREAD
from klineage.config import clip, write_whole
from klineage.optimize import evidence_line


def _f(value, fmt: str = ".3f") -> str:
    return "n/a" if value is None else format(value, fmt)


def untimed_attempts(result: dict) -> list[str]:
    """The attempts of a timed run whose timing failed (`not_timed`; reports written before that outcome existed
    called them `not_faster` with no measurement), as `instance/method evaluation N: why`."""
    found = []
    for key, t in result.get("trajectories", {}).items():
        for a in t.get("attempts", []):
            effect = a.get("effect") or {}
            if a["outcome"] == "not_timed" or (a["outcome"] == "not_faster" and not effect.get("measured")):
                found.append(f"{key} evaluation {a['evaluation']}: {clip(effect.get('why') or 'no time taken', 300)}")
    return found


def _roofline_target_line(summary: dict) -> str:
    """One sentence: per suite, how many memory-bound instances each method ended at ROOFLINE_TARGET or better
    (klineage's misses named with their fractions)."""
    suites = dict.fromkeys(g for m in summary.values() for g in m.get("memory_bound_at_target", {}))
    parts = []
    for suite_name in suites:
        said = []
        for method, m in summary.items():
            group = m.get("memory_bound_at_target", {}).get(suite_name)
            if not group:
                continue
            under = ", ".join(f"{name} {_f(f, '.2f')}" for name, f in group["under"].items())
            said.append(
                f"{method} {group['reached']} of {group['instances']}"
                + (f" (under: {under})" if method == "klineage" and under else "")
            )
        parts.append(f"{suite_name or 'all'}: " + ", ".join(said))
    if not parts:
        return ""
    return (
        f"Memory-bound instances at {ROOFLINE_TARGET:.0%} of the roofline or better (the bench case's bound, "
        "from the profile gate): " + "; ".join(parts) + "."
    )


def markdown(result: dict) -> str:
    """The report a reader opens first: the stamp, the summary per method with what to weigh it by, every row, and
    the starts that were skipped."""
    lines = [
        *_heading(result),
        *_summary_table(result["summary"]),
        *_escape_notes(result),
        *_effort_notes(result),
        *_rows_table(result["rows"]),
        *_skipped(result),
        *_suite_shares(result),
    ]
    return "\n".join(lines) + "\n"


def _suite_shares(result: dict) -> list[str]:
    """Per suite, the shares that load, start correct and improve, with rejections classified and the fresh-process
    re-times (metrics.suite_shares); only for a run that classified rejections or re-timed (the wild suite)."""
    if not (result.get("rejections") or result.get("checks") or any(r.get("retimed_speedup") for r in result["rows"])):
        return []
    from klineage.bench.metrics import suite_shares

    lines = []
    for name, s in suite_shares(result).items():
        classes = ", ".join(f"{n} {c}" for c, n in sorted(s["rejections"].items())) or "none"
        lines += [
            "",
            f"Suite {name}: {s['offered']} offered ({s['not_offered']} more not offered), {s['loaded']} load "
            f"({_f(s['load_share'], '.0%')}), {s['started']} start correct ({_f(s['start_share'], '.0%')}"
            + (f" of the {s['offered'] - s['unfinished']} finished, {s['unfinished']} not" if s["unfinished"] else "")
            + "); "
            f"rejections: {classes}; the program as written passes against PyTorch's op on "
            f"{s['pass_against_pytorch']} of {s['checked_against_pytorch']} checked.",
            "",
            "| method | improved | geomean speedup | geomean re-timed | evaluations to 95% | escapes "
            "| worst reported / re-timed |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for method, m in s["methods"].items():
            worst = m["worst_reported_over_retimed"]
            shown = f"{worst['ratio']:.3f} ({worst['instance']})" if worst else "n/a"
            lines.append(
                f"| {method} | {_f(m['improved_share'], '.0%')} | {_f(m['geomean_speedup'])} | "
                f"{_f(m['geomean_retimed_speedup'])} | {_f(m['mean_evaluations_to_95'], '.1f')} | {m['escapes']} | "
                f"{shown} |"
            )
    rejected = result.get("rejections", {})
    if rejected:
        lines += [
            "",
            "| rejected | stage | gate | code | class | against PyTorch's op |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for name, r in rejected.items():
            lines.append(
                f"| {name} | {r['stage']} | {r['gate'] or '-'} | {r['code'] or '-'} | {r['class']} | "
                f"{r['against_pytorch'] or '-'} |"
            )
    if not result["stamp"].get("timed"):
        lines += ["", "Timing needs a GPU: this run checked loads, starts and correctness only."]
    for name, why in result.get("not_offered", {}).items():
        lines.append(f"- not offered: {name}: {why}")
    return lines


def _engine_lines(engine: dict | None) -> list[str]:
    """Where a distributed run ran (klineage.scale), which instances ran more than once (a worker lost mid-task)
    and which failed on every try; nothing for the embedded single process."""
    if not engine:
        return []
    line = f"Engine: Dask distributed on {engine['engine']}, {engine['workers']} workers."
    if engine.get("retried"):
        line += " Retried (a worker lost mid-task): " + ", ".join(
            f"{name} ({n} attempts)" for name, n in engine["retried"].items()
        )
        line += "."
    if engine.get("failed"):
        line += " Failed on every attempt: " + "; ".join(f"{n}: {why}" for n, why in engine["failed"].items()) + "."
    return [line, ""]


def _heading(result: dict) -> list[str]:
    """Title, stamp, and what the run was: cut short, with which library, timed or not."""
    s = result["stamp"]
    lines = [
        f"# KLineage bench: {', '.join(s['methods'])} on {len(s['instances'])} instances",
        "",
        f"Device {s['device']}; commit {s['commit']}; budget {s['budget']} gate evaluations per run; "
        f"{s['date']}; {s['seconds']:.0f} s; versions {s['versions']}.",
        "",
    ]
    if s.get("partial"):
        lines += [
            f"Partial: the run was cut short; these are the {len(s['instances'])} instances it finished."
            + (f" Not finished: {', '.join(s['unfinished'])}." if s.get("unfinished") else ""),
            "",
        ]
    lines += _engine_lines(result.get("engine"))
    evidence = next((t["evidence"] for t in result.get("trajectories", {}).values() if t.get("evidence")), None)
    if evidence:  # klineage's library, the same for every instance of a run
        lines += [evidence_line(evidence, s["timed"]), ""]
    if not s["timed"]:
        lines += [
            "No GPU: nothing was timed. Speedups, roofline fractions and evaluations-to-95% need a GPU; the "
            "gates, refusals and escape re-checks below are real.",
            "",
        ]
    return lines


def _summary_table(summary: dict) -> list[str]:
    lines = [
        "| method | geomean speedup | x expert | x torch.compile | roofline | evals to 95% | failed share | "
        "fast_1 | escapes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, m in summary.items():
        lines.append(
            f"| {method} | {_f(m['geomean_speedup'])} | {_f(m['geomean_expert_fraction'])} | "
            f"{_f(m['geomean_vs_torch_compile'])} | {_f(m['mean_roofline_fraction'], '.2f')} | "
            f"{_f(m['mean_evaluations_to_95'], '.1f')} | {_f(m['mean_failed_share'], '.2f')} | "
            f"{_f(m['fast_1'], '.2f')} | {m['escapes']} |"
        )
    return lines


def _escape_notes(result: dict) -> list[str]:
    """How escapes count in the summary, and the re-checks that could not run."""
    lines = []
    if any(m["escapes"] for m in result["summary"].values()):
        lines += [
            "",
            "A final program that escaped counts as its start in these summaries (x1.0, no evaluations to "
            "95%, no target for the others); the table below shows what was measured, with the escape.",
        ]
    if unchecked := [
        f"{r['instance']}/{r['method']} {e['check']}: {e['reason']}"
        for r in result["rows"]
        for e in r.get("unchecked", [])
    ]:
        lines += [
            "",
            f"Escape re-checks that could not run ({len(unchecked)}; the harness raised instead of judging, "
            "so these final programs were not re-checked and count as measured): " + "; ".join(unchecked) + ".",
        ]
    return lines


def _effort_notes(result: dict) -> list[str]:
    """Evaluations to 95% paired and against each instance's best, memory-bound instances at the roofline
    target, references timed twice and timings that failed."""
    s, summary = result["stamp"], result["summary"]
    lines = []
    paired = (summary.get("klineage") or {}).get("paired_evaluations_to_95") or {}
    if s["timed"] and any(p["instances"] for p in paired.values()):
        lines += [
            "",
            "Evaluations to 95%, paired (instances where both methods improved): "
            + "; ".join(
                f"klineage {_f(p['klineage'], '.1f')} vs {other} {_f(p[other], '.1f')} on {p['instances']}"
                for other, p in paired.items()
            )
            + ".",
        ]
    best = {m: v["evaluations_to_95_of_best"] for m, v in summary.items() if "evaluations_to_95_of_best" in v}
    if s["timed"] and any(b["instances"] for b in best.values()):
        lines += [
            "",
            "Evaluations to 95% of the instance's best (the best log-speedup any method reached on it, on "
            f"the {next(iter(best.values()))['instances']} instances some method improved; a miss counts "
            f"{s['budget'] + 1}): "
            + "; ".join(f"{m} {_f(b['mean'], '.1f')} ({b['reached']} reached)" for m, b in best.items())
            + ".",
        ]
    if s["timed"] and (line := _roofline_target_line(summary)):
        lines += ["", line]
    return lines + _timing_notes(result)


def _timing_notes(result: dict) -> list[str]:
    """Instances whose eager and torch.compile are PyTorch's op, references timed twice, and candidates whose timing
    failed."""
    lines = []
    references = result.get("references", {})
    if of_pytorch := sorted(name for name, ref in references.items() if ref.get("eager_of") == EAGER_OF_PYTORCH):
        lines += [
            "",
            f"Eager and torch.compile are PyTorch's own op on the same inputs, not the start again "
            f"({len(of_pytorch)}): {', '.join(of_pytorch)}.",
        ]
    failed = {name: ref["eager"]["error"] for name, ref in references.items() if "error" in ref.get("eager", {})}
    if failed:
        lines += [
            "",
            f"PyTorch's op failed on this device ({len(failed)}; no eager or torch.compile time, the programs timed "
            "all the same): " + "; ".join(f"{name} ({error[:120]})" for name, error in sorted(failed.items())) + ".",
        ]
    if retimed := sorted(name for name, ref in references.items() if ref.get("rounds", 1) > 1):
        lines += [
            "",
            f"References timed twice ({len(retimed)}; a program's spread in the first round was over "
            f"{REFERENCE_SPREAD}, and the steadier round is reported): {', '.join(retimed)}.",
        ]
    if result["stamp"]["timed"] and (missed := untimed_attempts(result)):
        lines += [
            "",
            f"Timings that failed ({len(missed)}; these candidates passed the gates and were not kept, "
            "with no time taken, so their method's result may be lower than a measurement would have made "
            "it): " + "; ".join(missed) + ".",
        ]
    return lines


def _kept(row: dict) -> str:
    """Kept steps, and the gains a confirmation re-time refused (optimize._confirmed) beside them."""
    refused = [c for c in row.get("confirmations", []) if not c["kept"]]
    if not refused:
        return str(row["kept"])
    return (
        f"{row['kept']} ({len(refused)} not confirmed: "
        + ", ".join(
            f"x{c['first_speedup']:.2f} then x{c['confirmed_speedup']:.2f}"
            if c.get("confirmed_speedup")
            else "re-time failed"
            for c in refused
        )
        + ")"
    )


def _rows_table(rows: list[dict]) -> list[str]:
    lines = [
        "",
        "| instance | method | speedup | x expert | roofline | x torch.compile | evals | to 95% | kept | "
        "refused | escapes | stop |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        esc = "; ".join(e["check"] for e in r["escapes"]) or "0"
        if r.get("unchecked"):
            esc += f" ({len(r['unchecked'])} could not run)"
        lines.append(
            f"| {r['instance']} | {r['method']} | {_f(r['speedup'])} | {_f(r['expert_fraction'])} | "
            f"{_f(r['roofline_fraction'], '.2f')} | {_f(r['vs_torch_compile'])} | {r['evaluations']} | "
            f"{r['evaluations_to_95'] or 'n/a'} | {_kept(r)} | {r['refusals']} | {esc} | {r['stop']} |"
        )
    return lines


def _skipped(result: dict) -> list[str]:
    if not result.get("skipped"):
        return []
    lines = ["", "Skipped (the start fails its gates on this device, so no method can start from it):", ""]
    return lines + [f"- {name}: {why}" for name, why in result["skipped"].items()]


PLOTS_EXTRA = 'pip install -e ".[plots]"'  # matplotlib: pyproject.toml


def plots_missing(result: dict) -> str:
    """Why a timed run drew no plots (matplotlib not installed), with what to install; "" where nothing is missing."""
    import importlib.util

    if not result["stamp"]["timed"] or importlib.util.find_spec("matplotlib") is not None:
        return ""
    return f"no plots drawn: matplotlib is not installed ({PLOTS_EXTRA}); bench.json holds the same data"


def plots(result: dict, out: Path) -> list[Path]:
    """Best speedup against gate evaluations spent (per method), fraction of roofline and speedup over
    torch.compile per instance, for a timed run. Needs matplotlib (the `plots` extra: `pip install -e
    ".[plots]"`); without it, nothing is drawn (`plots_missing` says so) and the JSON holds the same data."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    if not result["stamp"]["timed"]:
        return []
    written = [out / "speedup_vs_evaluations.png"]
    _speedup_curves(plt, result, written[-1])
    for metric, label, name in (
        ("roofline_fraction", "fraction of roofline", "roofline.png"),
        ("vs_torch_compile", "speedup over torch.compile", "vs_torch_compile.png"),
    ):
        written.append(out / name)
        _bars(plt, result, metric, label, written[-1])
    return written


def _speedup_curves(plt, result: dict, path: Path) -> None:
    """Per method, the geometric mean over instances of the best speedup reached after each gate evaluation."""
    fig, ax = plt.subplots(figsize=(7, 4))
    budget = result["stamp"]["budget"]
    for method in result["stamp"]["methods"]:
        curves = []
        for key, t in result["trajectories"].items():
            if not key.endswith(f"/{method}"):
                continue
            best, curve, attempts = 0.0, [], {a["evaluation"]: a for a in t["attempts"]}
            for e in range(1, budget + 1):
                a = attempts.get(e)
                if a and a["kept"] and a["effect"].get("measured"):
                    best += math.log(a["effect"]["speedup"])
                curve.append(best)
            curves.append(curve)
        if curves:
            mean = [math.exp(sum(c[i] for c in curves) / len(curves)) for i in range(budget)]
            ax.plot(range(1, budget + 1), mean, label=method)
    ax.set_xlabel("gate evaluations spent")
    ax.set_ylabel("geomean best speedup (product of kept steps)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _bars(plt, result: dict, metric: str, label: str, path: Path) -> None:
    """One row metric per instance, a bar per method."""
    fig, ax = plt.subplots(figsize=(max(7, len(result["stamp"]["instances"]) * 0.5), 4))
    methods = result["stamp"]["methods"]
    width = 0.8 / len(methods)
    for j, method in enumerate(methods):
        values = [
            next((r[metric] or 0 for r in result["rows"] if r["instance"] == i and r["method"] == method), 0)
            for i in result["stamp"]["instances"]
        ]
        ax.bar([k + j * width for k in range(len(values))], values, width, label=method)
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(result["stamp"]["instances"]))])
    ax.set_xticklabels(result["stamp"]["instances"], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(label)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(result: dict, out: Path, plot: bool = True) -> dict[str, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bench.json", "markdown": out / "bench.md"}
    # rewritten after every instance, and a shard ends by a kill at its deadline: `--resume` and `bench-merge` read it
    write_whole(paths["json"], json.dumps(result, indent=1, default=str))
    write_whole(paths["markdown"], markdown(result))
    for p in plots(result, out) if plot else []:
        paths[p.stem] = p
    return paths
