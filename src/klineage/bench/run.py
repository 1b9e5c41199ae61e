"""A bench run: every method on every instance under one budget, then references timed side by side and escapes
re-checked; with resuming (`earlier`), sharding, a queue shared by processes, and merging shards' reports."""

from __future__ import annotations

import datetime
import functools
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from klineage.bench.metrics import Row, summarize
from klineage.bench.references import EAGER_OF_REFERENCE, ReferencesPayload, escapes
from klineage.bench.suites import Instance
from klineage.config import Settings, clip, device_name, versions
from klineage.gates import GateRequest
from klineage.optimize import Trajectory, optimize, proposer_for
from klineage.sandbox import GpuTurns, Job, Sandbox
from klineage.workload import UserError, Workload, load_workload


def _git_commit(known: str = "") -> str:
    """The code's commit: `known` (Settings.commit) where the tree travelled without its history (a device
    machine), else git's."""
    if known:
        return known
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def run_bench(
    instances: list[Instance],
    methods: list[str],
    budget: int,
    settings: Settings,
    device: str,
    library: Path | None,
    memory: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
    on_instance: Callable[[dict], None] | None = None,
    earlier: dict | None = None,
    claim: Callable[[str], bool] | None = None,
    retime: bool = False,
    not_offered: dict[str, str] | None = None,
) -> dict:
    """Every method on every instance under one budget, then references timed side by side and escapes re-checked.
    `on_instance` gets the result so far after each instance (marked `partial`), so a run cut short keeps what it
    finished. `earlier`: a report of the same methods and budget on this device (`bench --resume`); the instances it
    finished are carried over as they are, each row with the commit that made it, and only the rest are run.
    `claim` (a Queue's): an instance is run only where it says this process may take it; the report then lists
    the instances this process ran, and its stamp's `suite` every instance it was offered. `retime`: every final
    program is timed again after the methods finish, with its start, in a fresh process (a sandbox of its own, no
    warm server), beside the side-by-side time the row reports. `not_offered`: a suite's kernels left out before the
    run, with why (a package not installed), reported as they are."""
    tally, done = begin(instances, methods, budget, settings, device, earlier, not_offered)
    with Sandbox(warm=settings.warm) as sandbox:
        plan = BenchPlan(methods, budget, settings, device, library, memory, sandbox, on_progress, tally.commit, retime)
        for inst in instances:
            if inst.name in done or (claim is not None and not claim(inst.name)):
                continue
            tally.ran.append(inst)
            run_instance(inst, plan, tally)  # False: its start failed, reported as skipped; the suite goes on
            if on_instance and inst is not instances[-1]:  # a skipped start too: a run cut short keeps its rejections
                so_far = tally.result(partial=True)
                # a queue's next instance is not this process's to name: bench-merge names what nobody finished
                so_far["stamp"]["unfinished"] = [] if claim else [i.name for i in instances if i not in tally.ran]
                on_instance(so_far)
    return tally.result(partial=False)


def begin(
    instances: list[Instance],
    methods: list[str],
    budget: int,
    settings: Settings,
    device: str,
    earlier: dict | None,
    not_offered: dict[str, str] | None,
) -> tuple[Tally, set[str]]:
    """A run's tally before its first instance, with what `earlier` finished carried over; and those instances'
    names (run_bench; bench.engine for a cluster)."""
    tally = Tally(instances, methods, budget, device, _git_commit(settings.commit))
    tally.not_offered = dict(not_offered or {})
    done = _finished(earlier, instances, methods, budget, device) if earlier else set()
    for name in done:  # every row, trajectory and reference of an instance is measured within one run: carried whole
        tally.carry(earlier, name)
    tally.ran = [i for i in instances if i.name in done]
    return tally, done


@dataclass(frozen=True)
class BenchPlan:
    """What every instance of one bench run shares: the methods and their budget, where they run, what they read."""

    methods: list[str]
    budget: int
    settings: Settings
    device: str
    library: Path | None
    memory: Path | None
    sandbox: Sandbox
    on_progress: Callable[[str], None] | None
    commit: str  # the code that makes this run's rows
    retime: bool = False  # every final program timed again in a fresh process after the methods (run_bench)

    def say(self, line: str) -> None:
        if self.on_progress:
            self.on_progress(line)


@dataclass
class Tally:
    """What a bench run has so far, per instance: rows, trajectories, references, skipped starts and costs."""

    suite: list[Instance]  # every instance offered
    methods: list[str]
    budget: int
    device: str
    commit: str
    started: float = field(default_factory=time.perf_counter)
    ran: list[Instance] = field(default_factory=list)  # carried over or run here, in the order they were
    rows: list[Row] = field(default_factory=list)
    trajectories: dict[str, dict] = field(default_factory=dict)
    references: dict[str, dict] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    costs: dict[str, dict] = field(default_factory=dict)  # per instance, the seconds outside the methods' runs
    rejections: dict[str, dict] = field(default_factory=dict)  # per instance not loaded or not started: classified
    checks: dict[str, dict] = field(default_factory=dict)  # per instance, its start checked against PyTorch's op
    not_offered: dict[str, str] = field(default_factory=dict)

    def carry(self, earlier: dict, name: str) -> None:
        """An instance `earlier` (a bench report) finished, as it is there."""
        self.rows += [
            Row(**_recognized({"commit": earlier["stamp"]["commit"], **r}))
            for r in earlier["rows"]
            if r["instance"] == name
        ]
        self.trajectories.update({k: v for k, v in earlier["trajectories"].items() if k.split("/")[0] == name})
        if name in earlier["references"]:
            self.references[name] = earlier["references"][name]
        if name in earlier.get("skipped", {}):
            self.skipped[name] = earlier["skipped"][name]
        if name in earlier.get("costs", {}):
            self.costs[name] = earlier["costs"][name]
        for key in ("rejections", "checks"):
            if name in earlier.get(key, {}):
                getattr(self, key)[name] = earlier[key][name]

    def absorb(self, other: Tally) -> None:
        """What another tally ran (a cluster task's one instance, bench.engine), added to this one."""
        self.ran += other.ran
        self.rows += other.rows
        for key in ("trajectories", "references", "skipped", "costs", "rejections", "checks"):
            getattr(self, key).update(getattr(other, key))

    def in_order(self, instances: list[Instance]) -> None:
        """Instances and rows in suite order (tasks end in any order), each instance's rows in method order as the
        serial path appends them."""
        at = {inst.name: i for i, inst in enumerate(instances)}
        self.ran.sort(key=lambda inst: at.get(inst.name, len(at)))
        self.rows.sort(key=lambda r: at.get(r.instance, len(at)))  # stable: each instance's methods keep their order

    def result(self, partial: bool) -> dict:
        """The report so far: its stamp (device, versions, budget, commits, date...), rows, summary and the rest."""
        return {
            "stamp": {
                "device": device_name(self.device),
                "versions": versions(),
                "budget": self.budget,
                "commit": ", ".join(sorted({r.commit for r in self.rows if r.commit} | {self.commit})),
                "methods": self.methods,
                "instances": [i.name for i in self.ran],
                "suite": [i.name for i in self.suite],
                "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                "seconds": time.perf_counter() - self.started,
                "timed": self.device == "cuda",
                "partial": partial,
            },
            "rows": [asdict(r) for r in self.rows],
            "summary": summarize(self.rows, self.methods, self.trajectories, self.budget),
            "references": dict(self.references),
            "trajectories": dict(self.trajectories),
            "skipped": dict(self.skipped),
            "costs": dict(self.costs),
            "rejections": dict(self.rejections),
            "checks": dict(self.checks),
            "not_offered": dict(self.not_offered),
        }


def run_instance(inst: Instance, plan: BenchPlan, tally: Tally) -> bool:
    """Every method on one instance, then its references and each final program's escapes, into `tally`. False
    when its workload does not load or its start fails its gates here (then skipped, with why; a wild instance's
    rejection classified, bench.rejections)."""
    from klineage.bench.rejections import against_pytorch, classify

    def rejected(stage: str, why: str) -> bool:
        tally.skipped[inst.name] = why
        checked = against_pytorch(inst, plan.settings, plan.device, plan.sandbox) if inst.origin else None
        if checked is not None:
            tally.checks[inst.name] = checked
        tally.rejections[inst.name] = classify(stage, why, checked)
        return False

    try:
        workload = load_workload(inst.workload)
    except UserError as e:  # a wild kernel's own program may not import here: reported, and the suite goes on
        return rejected("load", f"the workload does not load: {e}")
    memo: dict = {}  # the instance's measurements, shared by its methods (optimize's `memo`)
    try:
        finals = _optimize_each(inst, workload, plan, memo, tally.trajectories)
    except UserError as e:  # a start that fails its gates here: reported, and the suite goes on
        return rejected("start", str(e))
    if inst.origin and plan.device == "cpu":  # what the CPU says of the program as written, for the GPU's share
        tally.checks[inst.name] = against_pytorch(inst, plan.settings, plan.device, plan.sandbox)
    began = time.perf_counter()
    ref = _time_references(inst, workload, finals, plan) if plan.device == "cuda" else {}
    if ref and plan.retime and "error" not in ref:
        ref["retime"] = _retime(inst, workload, finals, plan)
    tally.references[inst.name] = ref
    tally.costs[inst.name] = {"references_s": round(time.perf_counter() - began, 3)}
    began = time.perf_counter()
    for method, t in finals.items():
        tally.rows.append(_row(inst, workload, method, t, ref, memo, plan))
    tally.costs[inst.name]["escapes_s"] = round(time.perf_counter() - began, 3)
    return True


def _optimize_each(
    inst: Instance, workload: Workload, plan: BenchPlan, memo: dict, trajectories: dict
) -> dict[str, Trajectory]:
    """Each method's run from the instance's start, its trajectory kept as it ends; the final trajectories."""
    finals: dict[str, Trajectory] = {}
    for method in plan.methods:
        plan.say(f"{inst.name}: {method}")
        proposer = proposer_for(method, workload, plan.settings, plan.device, plan.library, plan.memory)
        on_attempt = functools.partial(say_attempt, plan.on_progress, f"{inst.name}: {method}")
        t = optimize(
            workload,
            inst.start,
            proposer,
            plan.settings,
            plan.device,
            plan.budget,
            plan.sandbox,
            memo=memo,
            on_attempt=on_attempt,
        )
        finals[method] = t
        trajectories[f"{inst.name}/{method}"] = t.as_dict()
    return finals


def _time_references(inst: Instance, workload: Workload, finals: dict[str, Trajectory], plan: BenchPlan) -> dict:
    """PyTorch eager, torch.compile, the start, the expert and each method's final program timed in one job
    (references_job: the programs side by side, apart from eager and torch.compile): per name, its time and spread,
    and which Model eager and torch.compile were (`eager_of`); or the job's error."""
    plan.say(f"{inst.name}: references")
    # each distinct program timed once: a method that kept nothing is its start, not a second sample
    named = [("start", inst.start)] + ([("expert", inst.expert)] if inst.expert else [])
    named += [(f"final:{method}", t.best) for method, t in finals.items()]
    distinct = list({p.hash: p for _, p in named}.values())
    job = _timing_job(inst, workload, distinct, plan)
    result = plan.sandbox.run(job)
    if not result.ok:
        return {"error": clip(result.error, 2000)}
    timed = {p.hash: result.value[f"program{i}"] for i, p in enumerate(distinct)}
    ref = {k: result.value.get(k, {}) for k in ("eager", "torch_compile")}
    ref["eager_of"] = result.value.get("eager_of", EAGER_OF_REFERENCE)
    ref.update({name: timed[p.hash] for name, p in named})
    ref["rounds"] = result.value.get("rounds", 1)
    return ref


def _timing_job(
    inst: Instance, workload: Workload, distinct: list, plan: BenchPlan, programs_only: bool = False
) -> Job:
    """The job that times `distinct` programs side by side, and the references apart (references_job): eager and
    torch.compile of PyTorch's own op where the instance has a PyTorch-op workload (a wild kernel's), else of the
    workload's Model; with `programs_only` (a re-time, which reads no reference's time), the programs alone."""
    request = GateRequest(str(workload.path), inst.start, plan.device, plan.settings)
    pytorch_op = inst.origin.get("pytorch") or None
    payload = ReferencesPayload(request, tuple(distinct), pytorch_op=pytorch_op, programs_only=programs_only)
    return Job(
        "klineage.bench.references:references_job",
        payload,
        timeout_s=plan.settings.timeout_s * 2,
        device=plan.device,
        turns=GpuTurns.of(plan.settings),
    )


def _retime(inst: Instance, workload: Workload, finals: dict[str, Trajectory], plan: BenchPlan) -> dict:
    """The start and each method's final program timed again after the methods finished, in a fresh process: a
    sandbox of its own without a warm server, so nothing of the run's processes (caches, autotune picks, a warm
    allocator) carries over. Per name, its time; or the job's error."""
    plan.say(f"{inst.name}: re-timing the final programs in a fresh process")
    named = [("start", inst.start)] + [(f"final:{method}", t.best) for method, t in finals.items()]
    distinct = list({p.hash: p for _, p in named}.values())
    job = _timing_job(inst, workload, distinct, plan, programs_only=True)
    with Sandbox(warm=False) as fresh:
        result = fresh.run(job)
    if not result.ok:
        return {"error": clip(result.error, 2000)}
    timed = {p.hash: result.value[f"program{i}"] for i, p in enumerate(distinct)}
    return {name: timed[p.hash] for name, p in named}


def _row(inst: Instance, workload: Workload, method: str, t: Trajectory, ref: dict, memo: dict, plan: BenchPlan) -> Row:
    """One method's row on the instance: its final program re-checked for escapes, its times over the references'."""
    plan.say(f"{inst.name}: {method}: re-checking for escapes")
    if ("escapes", t.best.hash) not in memo:  # methods that ended on the same program: checked once
        memo[("escapes", t.best.hash)] = escapes(workload, inst.start, t.best, plan.settings, plan.device, plan.sandbox)
    recheck = memo[("escapes", t.best.hash)]
    final_ms = ref.get(f"final:{method}", {}).get("ms")
    start_ms = ref.get("start", {}).get("ms")
    compiled_ms = ref.get("torch_compile", {}).get("ms")  # none where Inductor could not compile the reference
    again = ref.get("retime", {})
    final_again, start_again = again.get(f"final:{method}", {}).get("ms"), again.get("start", {}).get("ms")
    tried = len(t.attempts)
    return Row(
        instance=inst.name,
        method=method,
        speedup=start_ms / final_ms if start_ms and final_ms else None,
        expert_fraction=ref["expert"]["ms"] / final_ms if final_ms and "expert" in ref else None,
        roofline_fraction=t.roofline_fraction,
        vs_torch_compile=compiled_ms / final_ms if final_ms and compiled_ms else None,
        evaluations=t.evaluations,
        evaluations_to_95=t.evaluations_to(0.95),
        failed_share=sum(a.outcome == "failed_gate" for a in t.attempts) / tried if tried else 0.0,
        kept=sum(a.kept for a in t.attempts),
        refusals=len(t.refusals),
        escapes=recheck.escapes,
        seconds=t.seconds,
        stop=t.stop,
        best_hash=t.best.hash,
        commit=plan.commit,
        unchecked=recheck.unchecked,
        bound=t.bound,
        confirmations=confirmations(t),
        retimed_speedup=start_again / final_again if start_again and final_again else None,
    )


def confirmations(t) -> list[dict]:
    """The run's confirmation re-times (optimize._confirmed), one per gain the first timed pair saw."""
    return [
        {
            "evaluation": a.evaluation,
            "candidate": a.candidate.label,
            "first_speedup": c.get("first_speedup"),
            "confirmed_speedup": c.get("confirmed_speedup"),
            "kept": a.kept,
            "why": c["why"],
        }
        for a in t.attempts
        if "why" in (c := a.effect.get("confirmation", {}))
    ]


def _finished(earlier: dict, instances: list[Instance], methods: list[str], budget: int, device: str) -> set[str]:
    """The instances of `earlier` (a bench report) that a resumed run keeps: every method has its row there, or the
    start was skipped. A report of other methods, another budget or another device is a user error."""
    stamp = earlier["stamp"]
    for key, here in (("methods", methods), ("budget", budget), ("device", device_name(device))):
        if stamp[key] != here:
            raise UserError(
                f"--resume: the report in the output folder has {key} {stamp[key]}, this run {here}; "
                "use another --out or the same settings"
            )
    names = {i.name for i in instances}
    finished = {n for n in names if {r["method"] for r in earlier["rows"] if r["instance"] == n} >= set(methods)}
    return finished | (names & set(earlier.get("skipped", {})))


def shard(instances: list[Instance], spec: str) -> list[Instance]:
    """`I/N`: every N-th instance starting at the I-th (1-based), so N machines or GPUs split one suite."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise UserError(f"--shard {spec}: expected I/N, e.g. 1/2") from None
    if not 1 <= i <= n:
        raise UserError(f"--shard {spec}: I must be between 1 and N")
    return instances[i - 1 :: n]


class Queue:
    """The instances of one bench run handed out to the processes that share `folder`, one at a time: each takes
    the next instance in suite order that no other has claimed (a claim is a file created exclusively). With a
    fixed split (`--shard I/N`) a shard holding the naive matmul and the Liger cross-entropy ran out of time on its
    third instance while others sat idle: 3 of 32 instances were cut (H200, 12 shards: RESULTS.md#run-20). The
    folder belongs to one run: a claim stays after its process ends, finished or not."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder

    def claim(self, name: str) -> bool:
        path = self.folder / (re.sub(r"[^\w.-]", "_", name) + ".claim")
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(handle, "w") as f:
            f.write(f"{name} pid {os.getpid()} {datetime.datetime.now(datetime.UTC).isoformat()}\n")
        return True


def merge(results: list[dict]) -> dict:
    """One report from shards of one evaluation (same methods, budget and device). Shards made at different
    commits (an evaluation continued in a later session) merge, and the stamp lists every commit."""
    if not results:
        raise UserError("nothing to merge")
    first = results[0]["stamp"]
    for r in results[1:]:
        for key in ("methods", "budget", "device"):
            if r["stamp"][key] != first[key]:
                raise UserError(f"shards differ in {key}: {first[key]} vs {r['stamp'][key]}")
    rows = [_recognized({"commit": r["stamp"]["commit"], **row}) for r in results for row in r["rows"]]
    trajectories = {k: v for r in results for k, v in r["trajectories"].items()}
    commits = sorted({row["commit"] for row in rows} | {r["stamp"]["commit"] for r in results})
    finished = [i for r in results for i in r["stamp"]["instances"]]
    # every instance some shard was offered and none finished (a queue's shards name none of their own)
    offered = list(dict.fromkeys(i for r in results for i in r["stamp"].get("suite", r["stamp"]["instances"])))
    unfinished = list(
        dict.fromkeys(
            [i for r in results for i in r["stamp"].get("unfinished", [])] + [i for i in offered if i not in finished]
        )
    )
    stamp = {
        **first,
        "instances": finished,
        "commit": ", ".join(commits),
        "suite": offered,
        "seconds": max(r["stamp"]["seconds"] for r in results),
        "shards": len(results),
        "partial": any(r["stamp"].get("partial") for r in results) or bool(unfinished),
        "unfinished": unfinished,
    }
    return {
        "stamp": stamp,
        "rows": rows,
        "summary": summarize([Row(**row) for row in rows], first["methods"], trajectories, first["budget"]),
        "references": {k: v for r in results for k, v in r["references"].items()},
        "trajectories": trajectories,
        "skipped": {k: v for r in results for k, v in r.get("skipped", {}).items()},
        "costs": {k: v for r in results for k, v in r.get("costs", {}).items()},
        **{
            key: {k: v for r in results for k, v in r.get(key, {}).items()}
            for key in ("rejections", "checks", "not_offered")
        },
    }


def _recognized(row: dict) -> dict:
    """A row as this code writes it: rows written before `unchecked` existed filed a re-check whose harness raised
    (code `error`) under escapes."""
    if "unchecked" in row:
        return row
    return {
        **row,
        "escapes": [e for e in row["escapes"] if e["code"] != "error"],
        "unchecked": [e for e in row["escapes"] if e["code"] == "error"],
    }


def say_attempt(on_progress: Callable[[str], None] | None, where: str, attempt) -> None:
    """An attempt as one progress line: where, which evaluation, what was tried, how it ended, and its measured
    speedup over the current program where one was timed. The shards' logs are what a device run brings back when
    it is cut before its reports: an H100 run cut at 11 minutes left 166 evaluations there, kept and not faster,
    without one number (docs/runs/2026-12-06-h100-wild7)."""
    if on_progress:
        effect = attempt.effect
        timed = f" x{effect['speedup']:.3f}" if effect.get("measured") and effect.get("speedup") else ""
        on_progress(f"{where}: evaluation {attempt.evaluation}, {attempt.candidate.label}: {attempt.outcome}{timed}")
