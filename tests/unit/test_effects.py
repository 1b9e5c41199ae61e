"""Effects carried between data directories (klineage.effects): matched by transform and program hashes only,
never onto a step the GPU did not time, with the GPU's probes, and the skills saved again."""

import json

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.effects import export_effects, import_effects, read_export
from klineage.library import Library
from klineage.mine import Lineage, LineageStore, Step
from klineage.workload import UserError

H200 = "NVIDIA H200"


def _step(index: int, transform: str, parent: str, child: str, effect: dict, accepted: bool = True) -> Step:
    site = {
        "transform": transform,
        "function": "k",
        "index": 0,
        "line": 3 + index,
        "before": "x_ptr + offs  # SOURCE",
        "after": "x_ptr + offs.to(tl.int64)  # SOURCE",
        "params": {},
    }
    return Step(index, transform, "program", site, parent, child, accepted, [], effect, 0.0)


def _walk(home, effects: list[dict], hashes=(("e", "p1"), ("p1", "p2"), ("p2", "p3"))) -> Lineage:
    """A finished three-step lineage (int64 offsets, pipelining, launch knobs) written as a walk leaves it."""
    transforms = ("int64_offsets", "pipelining", "launch_knobs")
    steps = [
        _step(i, t, parent, child, effect)
        for i, (t, (parent, child), effect) in enumerate(zip(transforms, hashes, effects))
    ]
    lineage = Lineage("w-expert-0000-cpu", "w.py", "wh", "expert", "e", "cpu-interpreter-x86_64", {}, steps, True)
    store = LineageStore(home / "lineages" / lineage.id)
    store.write_meta({"workload_hash": "wh"})
    store.rewrite_steps(steps)
    store.write_lineage(lineage)
    return lineage


def _timed(speedup: float) -> dict:
    return {
        "measured": True,
        "case": "bench",
        "parent_ms": 1.0,
        "child_ms": 1.0 / speedup,
        "speedup": speedup,
        "parent_spread": 0.01,
        "child_spread": 0.01,
        "significant": True,
        "device": H200,
        "versions": {"triton": "3.6.0"},
        "static_delta": {"max_registers": 8},
    }


PROBED = {
    "predicate": "offsets_below_2_31",
    "description": "offsets fit in 32 bits",
    "status": "not_probed",
    "evidence": "no probe generator",
    "probe": {},
    "parent": {},
    "child": {},
}
CPU = {"measured": False, "why": "no GPU: no time was taken", "static_delta": {"max_registers": 0}}


def test_effects_go_only_to_the_programs_they_were_measured_on(tmp_path):
    gpu, laptop = tmp_path / "gpu", tmp_path / "laptop"
    _walk(gpu, [_timed(1.2), _timed(0.99), {"measured": False, "why": "timing failed: oom"}])
    (gpu / "lineages" / "w-expert-0000-cpu" / "probes-cuda.json").write_text(json.dumps({"0": [PROBED], "2": [PROBED]}))
    # the laptop's walk made the same first step, a different second child (another commit's transform), and the
    # third step, which the GPU could not time
    _walk(laptop, [CPU, CPU, CPU], hashes=(("e", "p1"), ("p1", "p2b"), ("p2b", "p3")))
    export = json.loads(json.dumps(export_effects(gpu)))  # what a file round trip gives
    assert [s["index"] for s in export["lineages"][0]["steps"]] == [0, 1]  # only timed steps travel
    assert "SOURCE" not in json.dumps(export)  # an export holds no program source
    (result,) = import_effects(laptop, export, "h200.json")
    assert (result.matched, result.kept, result.unmatched, result.probes) == (1, 0, (1, 2), 1)
    steps = LineageStore(laptop / "lineages" / "w-expert-0000-cpu").lineage().steps
    assert steps[0].effect["speedup"] == 1.2 and steps[0].effect["device"] == H200
    assert steps[0].effect["static_delta"] == {"max_registers": 0}  # the laptop's own compile, kept
    assert steps[0].effect["earlier"]["why"] == CPU["why"] and steps[0].effect["imported"]["from"] == "h200.json"
    assert not steps[1].effect["measured"] and not steps[2].effect["measured"]
    # the records on disk and the skills say the same
    assert (
        json.loads((laptop / "lineages" / "w-expert-0000-cpu" / "steps.jsonl").read_text().splitlines()[0])["effect"][
            "speedup"
        ]
        == 1.2
    )
    with Library(laptop / "library") as library:
        timed = {s.id: s.timed_devices() for s in library.list()}
    assert [d for sid, d in timed.items() if sid.startswith("int64_offsets")] == [[H200]]
    assert all(not d for sid, d in timed.items() if not sid.startswith("int64_offsets"))
    probes = json.loads((laptop / "lineages" / "w-expert-0000-cpu" / "probes-cuda.json").read_text())
    assert list(probes) == ["0"]  # step 2's probes belong to a step that did not match


def test_a_step_timed_here_keeps_its_own_effect_and_another_lineage_takes_nothing(tmp_path):
    gpu, other = tmp_path / "gpu", tmp_path / "other"
    _walk(gpu, [_timed(1.2), _timed(1.1), _timed(1.5)])
    lineage = _walk(other, [_timed(1.25), CPU, CPU])
    (result,) = import_effects(other, export_effects(gpu))
    assert (result.matched, result.kept, result.unmatched) == (2, 1, ())
    assert LineageStore(other / "lineages" / lineage.id).lineage().steps[0].effect["speedup"] == 1.25
    # another expert version: the same lineage id, another expert hash
    export = export_effects(gpu)
    export["lineages"][0] = {**export["lineages"][0], "expert_hash": "e2"}
    fresh = tmp_path / "fresh"
    _walk(fresh, [CPU, CPU, CPU])
    (result,) = import_effects(fresh, export)
    assert result.matched == 0 and "no record" in result.why


def test_a_file_that_is_not_an_export_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no effects file"):
        read_export(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"lineages": []}')
    with pytest.raises(UserError, match="not an effects export"):
        read_export(tmp_path / "bad.json")


def test_the_effects_commands(tmp_path):
    gpu, laptop = tmp_path / "gpu", tmp_path / "laptop"
    _walk(gpu, [_timed(1.2), _timed(1.1), _timed(1.5)])
    _walk(laptop, [CPU, CPU, CPU])
    runner = CliRunner()
    out = tmp_path / "h200.json"
    done = runner.invoke(main, ["effects", "export", str(out), "--home", str(gpu)])
    assert done.exit_code == 0, done.output
    assert "3 timed steps" in done.output
    done = runner.invoke(main, ["effects", "import", str(out), "--home", str(laptop), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)[0]["matched"] == 3
    bad = runner.invoke(main, ["effects", "import", str(tmp_path / "nope.json"), "--home", str(laptop)])
    assert bad.exit_code == 2 and bad.output.strip().startswith("error: no effects file")


def test_import_into_a_data_directory_without_lineages_says_so(tmp_path):
    runner = CliRunner()
    out = tmp_path / "e.json"
    out.write_text(json.dumps({"format": "klineage-effects/1", "lineages": []}))
    done = runner.invoke(main, ["effects", "import", str(out), "--home", str(tmp_path / "empty")])
    assert done.exit_code == 2 and "no lineages" in done.output
