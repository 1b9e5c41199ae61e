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


def test_walk_is_deterministic_and_resumes_after_kill(tmp_path, sandbox):
    reference = mine(load_workload(WORKLOAD), load_program(EXPERT), Settings(data_dir=tmp_path / "a", seeds=3),
                     "cpu", sandbox)  # fmt: skip
    assert len(reference.accepted) >= 4
    again = mine(load_workload(WORKLOAD), load_program(EXPERT), Settings(data_dir=tmp_path / "b", seeds=3),
                 "cpu", sandbox)  # fmt: skip
    assert summary(again) == summary(reference)
    # the finished walk read back as recorded, as a GPU box takes a walk made on the CPU (no gate runs)
    recorded = recorded_walk(load_workload(WORKLOAD), load_program(EXPERT), Settings(data_dir=tmp_path / "a"), "cpu")
    assert summary(recorded) == summary(reference) and recorded.finished

    home = tmp_path / "killed"
    lid = lineage_id(load_workload(WORKLOAD), load_program(EXPERT), "cpu")
    steps_file = home / "lineages" / lid / "steps.jsonl"
    env = {**os.environ, "KLINEAGE_HOME": str(home), "KLINEAGE_SEEDS": "3",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "klineage", "mine", str(WORKLOAD), str(EXPERT), "--device", "cpu",
                             "--no-probe"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
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
    with pytest.raises(MiningError, match="no walk of"):
        recorded_walk(workload, load_program(EXPERT), Settings(data_dir=tmp_path / "elsewhere"), "cpu")

    @dataclass
    class FakeGpu:  # stands in for the sandbox: the timing job's answer, and what it was asked
        jobs: list

        def run(self, job):
            self.jobs.append(job)
            if len(self.jobs) == 2:
                return SandboxResult(False, error="timing failed")
            return SandboxResult(True, value={"measured": True, "speedup": 1.5, "parent_spread": 0.01,
                                              "child_spread": 0.02, "significant": True, "parent_ms": 0.2,
                                              "child_ms": 0.3, "device": "Fake GPU"})  # fmt: skip

    fake = FakeGpu([])
    again = retime(lineage, workload, settings, "cuda", fake)
    assert [j.function for j in fake.jobs] == ["klineage.gates:profile_pair_job"] * 2
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
