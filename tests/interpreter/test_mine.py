"""The backward walk is deterministic and resumable: a walk killed with SIGKILL resumes from its last recorded
step and ends with the same lineage as an uninterrupted walk."""

import os
import signal
import subprocess
import sys
import time

import pytest

from klineage.config import Settings
from klineage.mine import lineage_id, mine, recorded_walk
from klineage.program import load_program
from klineage.skills import skills_from_lineage
from klineage.workload import load_workload
from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.interpreter

WORKLOAD = FIXTURES / "planted" / "workload.py"
EXPERT = FIXTURES / "planted" / "expert.py"


def summary(lineage):
    return [(s.transform, s.site["index"], s.accepted, s.child) for s in lineage.steps]


def test_walk_is_deterministic_and_resumes_after_kill(tmp_path, sandbox, planted):
    shared, reference, _ = planted  # the planted expert mined with seeds=3 once per run (tests/conftest.py)
    assert len(reference.accepted) >= 4
    again = mine(
        load_workload(WORKLOAD), load_program(EXPERT), Settings(data_dir=tmp_path / "b", seeds=3), "cpu", sandbox
    )
    assert summary(again) == summary(reference)
    # the finished walk read back as recorded, as a GPU box takes a walk made on the CPU (no gate runs)
    recorded = recorded_walk(load_workload(WORKLOAD), load_program(EXPERT), Settings(data_dir=shared.data_dir), "cpu")
    assert summary(recorded) == summary(reference) and recorded.finished

    home = tmp_path / "killed"
    lid = lineage_id(load_workload(WORKLOAD), load_program(EXPERT), "cpu")
    steps_file = home / "lineages" / lid / "steps.jsonl"
    env = {
        **os.environ,
        "KLINEAGE_HOME": str(home),
        "KLINEAGE_SEEDS": "3",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "klineage", "mine", str(WORKLOAD), str(EXPERT), "--device", "cpu", "--no-probe"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while time.time() < deadline and (not steps_file.is_file() or len(steps_file.read_text().splitlines()) < 2):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the walk and its sandbox servers, mid-flight
    proc.wait()
    recorded = steps_file.read_text().splitlines()
    assert 2 <= len(recorded) < len(reference.steps)
    resumed = mine(load_workload(WORKLOAD), load_program(EXPERT), Settings(data_dir=home, seeds=3), "cpu", sandbox)
    assert summary(resumed) == summary(reference)


def test_a_walk_recorded_against_another_version_of_the_workload_starts_over(tmp_path, sandbox):
    settings = Settings(data_dir=tmp_path / "home", seeds=2)
    first = mine(load_workload(WORKLOAD), load_program(EXPERT), settings, "cpu", sandbox, max_steps=1)
    assert len(first.steps) == 1
    changed = tmp_path / "planted" / "workload.py"
    changed.parent.mkdir()
    changed.write_text(WORKLOAD.read_text() + "\nVERSION = 2  # a new version of the workload\n")
    workload = load_workload(changed)
    assert workload.hash != load_workload(WORKLOAD).hash and workload.name == load_workload(WORKLOAD).name
    folder = tmp_path / "home" / "lineages" / lineage_id(workload, load_program(EXPERT), "cpu")
    resumed_same = mine(load_workload(WORKLOAD), load_program(EXPERT), settings, "cpu", sandbox, max_steps=2)
    assert len(resumed_same.steps) == 2  # same workload: resumed, one more step
    again = mine(workload, load_program(EXPERT), settings, "cpu", sandbox, max_steps=1)
    assert len(again.steps) == 1  # changed workload: a fresh walk, the old steps set aside
    assert list(folder.glob("steps.jsonl.workload-*"))


def test_retime_measures_accepted_steps_again_and_keeps_the_earlier_measurement(tmp_path, sandbox):
    from dataclasses import dataclass

    from klineage.mine import LineageStore, MiningError, retime
    from klineage.sandbox import SandboxResult

    settings = Settings(data_dir=tmp_path / "home", seeds=2)
    workload = load_workload(WORKLOAD)
    lineage = mine(workload, load_program(EXPERT), settings, "cpu", sandbox, max_steps=2)
    assert len(lineage.accepted) == 2 and all(not s.effect["measured"] for s in lineage.steps)
    with pytest.raises(MiningError):
        retime(lineage, workload, settings, "cpu", sandbox)
    with pytest.raises(MiningError, match="unfinished"):  # two steps of a longer walk: not a walk to time yet
        recorded_walk(workload, load_program(EXPERT), settings, "cpu")
    # as far as the cap asked: the same --max-steps on the GPU box takes it (both attempts were steps)
    assert recorded_walk(workload, load_program(EXPERT), settings, "cpu", max_steps=2).steps == lineage.steps
    with pytest.raises(MiningError, match="fewer than --max-steps 3"):
        recorded_walk(workload, load_program(EXPERT), settings, "cpu", max_steps=3)
    with pytest.raises(MiningError, match="no walk of"):
        recorded_walk(workload, load_program(EXPERT), Settings(data_dir=tmp_path / "elsewhere"), "cpu")

    @dataclass
    class FakeGpu:  # stands in for the sandbox: the timing job's answer, and what it was asked
        jobs: list

        def run(self, job):
            self.jobs.append(job)
            if len(self.jobs) == 2:
                return SandboxResult(False, error="timing failed")
            return SandboxResult(
                True,
                value={
                    "measured": True,
                    "speedup": 1.5,
                    "parent_spread": 0.01,
                    "child_spread": 0.02,
                    "significant": True,
                    "parent_ms": 0.2,
                    "child_ms": 0.3,
                    "device": "Fake GPU",
                    "parent_autotuned": {"k": {"(1,)": "parent's"}},
                    "child_autotuned": {"k": {"(1,)": "child's"}},
                },
            )

    fake = FakeGpu([])
    again = retime(lineage, workload, settings, "cuda", fake)
    assert [j.function for j in fake.jobs] == ["klineage.gates.profile:profile_pair_job"] * 2
    # the first pair's parent tunes; the next pair's parent, the first's child, runs what it ran there
    assert lineage.accepted[1].parent == lineage.accepted[0].child
    assert fake.jobs[0].payload[2] is None and fake.jobs[1].payload[2] == {"k": {"(1,)": "child's"}}
    first, second = again.accepted
    assert first.effect["speedup"] == 1.5 and first.effect["earlier"] == lineage.accepted[0].effect
    assert first.effect["static_delta"] == lineage.accepted[0].effect.get("static_delta", {})
    assert second.effect == lineage.accepted[1].effect  # a failed timing leaves the earlier measurement standing
    stored = LineageStore(tmp_path / "home" / "lineages" / lineage.id).steps()
    assert [s.effect for s in stored] == [s.effect for s in again.steps]
    # a walk made on the CPU and timed on a GPU: the skill's effect is the GPU's, its provenance the CPU walk's
    first_skill, second_skill = [k for k in skills_from_lineage(again) if k.kind == "optimization"][:2]
    assert lineage.device.startswith("cpu-interpreter") and first_skill.provenance["device"] == lineage.device
    assert list(first_skill.effect) == ["Fake GPU"] and first_skill.effect["Fake GPU"]["speedup"] == 1.5
    assert list(second_skill.effect) == [lineage.device] and not second_skill.effect[lineage.device]["measured"]


def test_a_stopped_retime_keeps_its_timings_and_mining_saves_skills_before_probing(tmp_path, sandbox, monkeypatch):
    """Run 16: experts walked on the CPU were timed on the H200 and the pipeline's limit cut them while timing or
    probing; no skill carried a GPU effect, because the timings were rewritten and the skills written only at the
    end."""
    import json
    from dataclasses import dataclass, replace

    import klineage.mine
    import klineage.mining
    from klineage.library import Library
    from klineage.mine import LineageStore, retime, timed_on
    from klineage.mining import mine_into
    from klineage.probing import stored_probes
    from klineage.sandbox import SandboxResult

    settings = Settings(data_dir=tmp_path / "home", seeds=2)
    workload, expert = load_workload(WORKLOAD), load_program(EXPERT)
    lineage = mine(workload, expert, settings, "cpu", sandbox, max_steps=2)
    store = LineageStore(tmp_path / "home" / "lineages" / lineage.id)

    @dataclass
    class StoppedGpu:  # times one pair, then the run is stopped (a pipeline's time limit)
        jobs: list
        stop_at: int

        def run(self, job):
            self.jobs.append(job)
            if len(self.jobs) == self.stop_at:
                raise KeyboardInterrupt
            return SandboxResult(
                True,
                value={
                    "measured": True,
                    "speedup": 1.25,
                    "parent_spread": 0.01,
                    "child_spread": 0.01,
                    "significant": True,
                    "parent_ms": 0.1,
                    "child_ms": 0.125,
                    "device": "Fake GPU",
                },
            )

    with pytest.raises(KeyboardInterrupt):
        retime(lineage, workload, settings, "cuda", StoppedGpu([], stop_at=2))
    stored = store.steps()
    assert [timed_on(s, "Fake GPU") for s in stored if s.accepted] == [True, False]  # the first timing is on disk
    assert [timed_on(s, "Fake GPU") for s in store.lineage().steps if s.accepted] == [True, False]
    monkeypatch.setattr(klineage.mine, "device_name", lambda device: "Fake GPU")  # the GPU this run is on
    resumed = StoppedGpu([], stop_at=0)
    again = retime(replace(lineage, steps=stored), workload, settings, "cuda", resumed, keep_timed=True)
    assert len(resumed.jobs) == 1 and all(timed_on(s, "Fake GPU") for s in again.accepted)  # the untimed one only
    explicit = StoppedGpu([], stop_at=0)
    retime(again, workload, settings, "cuda", explicit)
    assert len(explicit.jobs) == 2  # an explicit retime measures every step again
    monkeypatch.setattr(klineage.mine, "device_name", lambda device: "Another GPU")
    elsewhere = StoppedGpu([], stop_at=0)
    retime(again, workload, settings, "cuda", elsewhere, keep_timed=True)
    assert len(elsewhere.jobs) == 2  # another GPU's timings are taken again on this one

    # probes that finished before a stop are read back, over the walk device's for the steps not probed yet
    first = again.accepted[0].index
    folder = tmp_path / "home" / "lineages" / lineage.id
    condition = {
        "predicate": "contiguous",
        "description": "d",
        "status": "not_a_condition",
        "evidence": "e",
        "probe": {},
    }
    (folder / "probes.json").write_text(json.dumps({str(first): [condition]}))
    assert stored_probes(again, settings, "cuda") == {first: [condition]}
    gpu_condition = {**condition, "status": "condition"}
    (folder / "probes-cuda.json").write_text(json.dumps({str(first): [gpu_condition]}))
    assert stored_probes(again, settings, "cuda") == {first: [gpu_condition]}

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(klineage.mining, "probe_lineage", stopped)
    with Library(tmp_path / "library") as library, pytest.raises(KeyboardInterrupt):
        mine_into(library, workload, expert, settings, "cpu", max_steps=2)
    with Library(tmp_path / "library") as library:
        saved = {s.provenance["step"]: s for s in library.list() if s.kind == "optimization"}
    assert set(saved) == {s.index for s in again.accepted}  # saved before the probing that was stopped
    assert all("Fake GPU" in s.effect for s in saved.values())  # with the effects the GPU had timed
    assert [c["status"] for c in saved[first].conditions] == ["not_a_condition"]  # the walk device's probes
    assert all(c["status"] == "unprobed" for s in saved.values() if s is not saved[first] for c in s.conditions)


def test_probing_on_another_device_takes_the_walks_answers_and_probes_only_what_it_left_open(tmp_path, sandbox):
    """A walk made on one kind of device and probed on the other: the predicates the walk's device answered are taken
    from its probes (marked so), the ones it left `not_probed` are probed again. Here the roles are swapped so the
    interpreter can play the second device: a walk recorded as a GPU's, probed on the CPU."""
    import json
    from dataclasses import replace

    from klineage.probing import probe_lineage
    from klineage.transform import TRANSFORMS

    settings = Settings(data_dir=tmp_path / "home", seeds=2)
    workload, expert = load_workload(WORKLOAD), load_program(EXPERT)
    lineage = replace(mine(workload, expert, settings, "cpu", sandbox, max_steps=1), device="NVIDIA Fake GPU")
    (step,) = lineage.accepted
    predicates = TRANSFORMS[step.transform].conditions
    assert len(predicates) >= 2
    answered, left_open = predicates[0], predicates[1:]
    folder = tmp_path / "home" / "lineages" / lineage.id
    gpu_probes = [
        {
            "predicate": p,
            "description": "d",
            "status": "not_probed" if p in left_open else "condition",
            "evidence": "on the GPU",
            "probe": {},
            "parent": {},
            "child": {},
        }
        for p in predicates
    ]
    (folder / "probes.json").write_text(json.dumps({str(step.index): gpu_probes}))
    probes = probe_lineage(lineage, workload, settings, "cpu", sandbox)
    assert (folder / "probes-cpu.json").is_file()
    got = {c["predicate"]: c for c in probes[step.index]}
    assert [c["predicate"] for c in probes[step.index]] == list(predicates)  # the family's order
    assert got[answered]["status"] == "condition" and "where the walk ran" in got[answered]["evidence"]
    for p in left_open:
        assert "where the walk ran" not in got[p]["evidence"]  # probed here, with this device's own answer
