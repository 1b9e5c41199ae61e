"""Probing conditions. For an accepted step (parent: the expert's optimized form; child: the simplified form) and
each predicate of the transform's condition vocabulary, run the correctness gate on both programs on each probe case
that violates the predicate (klineage.probe makes them):

| parent | child | meaning |
| --- | --- | --- |
| fails | passes | a condition of the skill; the probe is its counterexample (the failure the condition avoids) |
| passes | fails | the optimized form is what handles this case: applying the skill is required here |
| passes | passes | not a condition (the code already guards it, or it does not matter here) |
| fails | fails | outside what either program handles |

A verdict that is a harness error, or an out-of-memory, says nothing about either program: that predicate is
reported as not probed, with the reason.

Each lineage's probes are kept beside it (`probes.json`), step by step, so a stopped run keeps what it probed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from klineage.config import Settings, clip, device_kind, write_whole
from klineage.gates import GateRequest, run_gate
from klineage.mine import Lineage, LineageStore, Step
from klineage.probe import ablated, make_probes, module_source
from klineage.program import Program
from klineage.sandbox import Sandbox
from klineage.transform import CONDITIONS
from klineage.workload import Workload


@dataclass(frozen=True)
class ProbeResult:
    predicate: str
    status: str  # condition | required | not_a_condition | outside_domain | not_probed
    probe: dict
    parent: dict  # {"status", "code", "reason"}
    child: dict
    why: str = ""

    def as_condition(self) -> dict:
        guard = self.probe.get("ablation", {}).get("removed")
        if guard and self.status == "condition":
            evidence = (
                f"ablation: the optimized form without `{guard}` fails ({self.parent['code']}) on repeated "
                f"launches where the simple form passes: the kernel is not idempotent, so the optimization "
                f"is valid only with `{guard}` (or on an idempotent kernel)"
            )
        elif guard and self.status == "not_a_condition":
            evidence = f"ablation: the optimized form passes even without `{guard}`: repeated launches are harmless"
        elif self.status == "condition":
            evidence = f"violating it breaks the optimized form ({self.parent['code']}) but not the simple one"
        elif self.status == "required":
            evidence = f"the simple form breaks ({self.child['code']}) where the optimized one passes"
        elif self.status == "not_a_condition":
            evidence = "both forms pass the probe"
        elif self.status == "outside_domain":
            evidence = "both forms fail the probe"
        else:
            evidence = self.why
        return {
            "predicate": self.predicate,
            "description": CONDITIONS[self.predicate],
            "status": self.status,
            "evidence": evidence,
            "probe": self.probe,
        }


# --- running probes -----------------------------------------------------------------------------------------------

RANK = ["condition", "required", "outside_domain", "not_a_condition", "not_probed"]


def classify(parent: dict, child: dict) -> tuple[str, str]:
    """(status, why) from the two verdicts. A harness error or an out-of-memory tells nothing about the programs."""
    for name, v in (("optimized", parent), ("simple", child)):
        if v["status"] == "error" or v["code"] == "oom":
            return "not_probed", f"the probe did not run to a verdict on the {name} form ({v['code']}: {v['reason']})"
    p_ok, c_ok = parent["status"] == "pass", child["status"] == "pass"
    return {
        (False, True): "condition",
        (True, False): "required",
        (True, True): "not_a_condition",
        (False, False): "outside_domain",
    }[(p_ok, c_ok)], ""


def in_expert_context(expert: Program, step: Step) -> Program | None:
    """The expert with only this step's simplification applied (the same family, function and code), or None."""
    from klineage.transform import TRANSFORMS

    cls = TRANSFORMS.get(step.transform)
    source = module_source(expert, step.module)
    if cls is None or not source:
        return None
    transform = cls()
    try:
        for site in transform.sites(source):
            if site.function == step.site["function"] and site.before == step.site["before"]:
                simplified = transform.simplify(source, site)
                return expert.with_source(step.module, simplified)  # keeps what was trusted
    except Exception:
        return None
    return None


def _run_probe(predicate, probe, parent, child, workload, settings, device, sandbox) -> ProbeResult:
    if "ablation" in probe:
        parent = ablated(parent, probe["ablation"])
        if parent is None:
            return ProbeResult(predicate, "not_probed", probe, {}, {}, "the ablation did not apply")
    verdicts = []
    for program in (parent, child):
        request = GateRequest(str(workload.path), program, device, settings, settings.target, probe=probe)
        v = run_gate("correctness", request, sandbox)
        verdicts.append({"status": v.status, "code": v.code, "reason": clip(v.reason, 300)})
    status, why = classify(*verdicts)
    return ProbeResult(predicate, status, probe, verdicts[0], verdicts[1], why)


def probe_step(
    workload: Workload,
    parent: Program,
    child: Program,
    step: Step,
    conditions: tuple[str, ...],
    settings: Settings,
    device: str,
    sandbox: Sandbox,
    expert: Program | None = None,
) -> list[ProbeResult]:
    """Probe one accepted step. Where both forms fail a probe, the failure may come from an earlier step of the
    lineage (both carry every earlier simplification): with `expert`, that probe is run again on the expert
    against the expert with only this step undone, and that outcome is the one recorded (marked "in the expert")."""
    results = []
    for predicate in conditions:
        probes, why = make_probes(predicate, workload, device, step.transform, parent, step)
        if not probes:
            results.append(ProbeResult(predicate, "not_probed", {}, {}, {}, why))
            continue
        outcomes = []
        for probe in probes:
            outcome = _run_probe(predicate, probe, parent, child, workload, settings, device, sandbox)
            if outcome.status == "outside_domain" and expert is not None and expert.hash != parent.hash:
                alone = in_expert_context(expert, step)
                if alone is not None:
                    again = {**probe, "name": f"{probe['name']}, in the expert (earlier steps not undone)"}
                    outcome = _run_probe(predicate, again, expert, alone, workload, settings, device, sandbox)
            outcomes.append(outcome)
        # the most telling outcome wins: one counterexample makes it a condition
        results.append(min(outcomes, key=lambda r: RANK.index(r.status)))
    return results


def probes_path(folder: Path, lineage: Lineage, device: str) -> Path:
    """Where a lineage's probes on `device` are kept: `probes.json` for the kind of device it was walked on, beside
    it `probes-<device>.json` for the other. A walk made on the CPU leaves the GPU-only conditions not probed; a GPU
    probes those again (where a GPU reused the CPU's file whole, the conditions the CPU had left unprobed stayed so:
    RESULTS.md#run-15) and takes the CPU's answers for the rest (probe_lineage)."""
    return folder / ("probes.json" if device == device_kind(lineage.device) else f"probes-{device}.json")


def read_probes(path: Path) -> dict[int, list[dict]]:
    """A probes file by step index: empty when there is none, or when it is unreadable (one cut by a kill before
    writes went through config.write_whole): its steps are probed again."""
    import json

    try:
        return {int(k): v for k, v in json.loads(path.read_text()).items()}
    except (FileNotFoundError, ValueError, AttributeError):  # none, not JSON, or not a mapping of step indices
        return {}


def write_probes(path: Path, probes: dict[int, list[dict]]) -> None:
    """A probes file by step index, written whole (a kill never leaves half of one)."""
    import json

    write_whole(path, json.dumps({str(k): v for k, v in sorted(probes.items())}, indent=2))


def stored_probes(lineage: Lineage, settings: Settings, device: str) -> dict[int, list[dict]]:
    """The probes kept for a lineage on `device` (those that finished, where a run was stopped), over the probes of
    the device it was walked on for the steps `device` has not probed yet."""
    folder = settings.data_dir / "lineages" / lineage.id
    found: dict[int, list[dict]] = {}
    for path in dict.fromkeys(
        [probes_path(folder, lineage, device_kind(lineage.device)), probes_path(folder, lineage, device)]
    ):
        found.update(read_probes(path))
    return found


def probe_lineage(
    lineage: Lineage, workload: Workload, settings: Settings, device: str, sandbox: Sandbox | None = None
) -> dict[int, list[dict]]:
    """Probe every accepted step; results are stored beside the lineage (`probes.json`) after each step and reused on
    a rerun. Steps are independent, so `settings.probe_workers` of them run side by side, each worker with a sandbox
    of its own (the given one among them).

    A walk made on the CPU and probed on a GPU: the predicates the CPU answered (a counterexample, or none that
    breaks either form) are taken from the walk's probes, marked so, and the GPU probes only those the interpreter
    cannot decide (`not_probed` there: alignment, hints, cache modifiers, what the interpreter ignores). Each probe
    is a pair of full checks: four experts that had finished their timing on one H200 were still being probed again
    in full at a six-minute limit (matmul had not finished one step; RESULTS.md#run-16)."""
    import queue
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from klineage.transform import TRANSFORMS, load_families

    load_families()
    store = LineageStore(settings.data_dir / "lineages" / lineage.id)
    path = probes_path(store.root, lineage, device)
    done = read_probes(path)
    todo = [s for s in lineage.accepted if s.index not in done and s.transform in TRANSFORMS]
    walk_path = probes_path(store.root, lineage, device_kind(lineage.device))
    walked = read_probes(walk_path) if walk_path != path else {}
    expert = store.load_program(lineage.expert_hash, lineage.expert)
    workers = max(1, min(settings.probe_workers, len(todo)))
    # a sandbox is used by one job at a time: each probe borrows one (servers start on first use)
    sandboxes = [sandbox or Sandbox(warm=settings.warm)] + [Sandbox(warm=settings.warm) for _ in range(workers - 1)]
    free: queue.SimpleQueue[Sandbox] = queue.SimpleQueue()
    for sb in sandboxes:
        free.put(sb)
    lock = threading.Lock()

    def probe_one(step) -> None:
        parent = store.load_program(step.parent, lineage.expert)
        child = store.load_program(step.child, lineage.expert)
        answered = {c["predicate"]: c for c in walked.get(step.index, []) if c["status"] != "not_probed"}
        conditions = TRANSFORMS[step.transform].conditions
        borrowed = free.get()
        try:
            results = probe_step(
                workload,
                parent,
                child,
                step,
                tuple(c for c in conditions if c not in answered),
                settings,
                device,
                borrowed,
                expert,
            )
        finally:
            free.put(borrowed)
        probed = {r.predicate: r.as_condition() | {"parent": r.parent, "child": r.child} for r in results}
        reused = {
            name: {**c, "evidence": f"{c['evidence']} (probed on {lineage.device}, where the walk ran)"}
            for name, c in answered.items()
        }
        with lock:
            done[step.index] = [probed.get(name) or reused[name] for name in conditions]
            write_probes(path, done)

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(probe_one, step) for step in todo]:
                future.result()  # a step that raised stops the run, as before; what finished is on disk
    finally:
        for sb in sandboxes:
            if sb is not sandbox:
                sb.close()
    return dict(done)
