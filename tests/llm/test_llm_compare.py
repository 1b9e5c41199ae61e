"""`klineage llm-compare` end to end through the loopback server: the same scripted "model" under one budget, with
skills as a curriculum on one side and the memory baseline's notes on the other; both trajectories and the
side-by-side report are written, model calls and tokens per arm. The numbers describe the harness, not a model."""

import json
from dataclasses import asdict

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.library import Library
from klineage.optimize import MemoryEntry, features
from klineage.program import load_program
from klineage.workload import load_workload
from tests.conftest import EXAMPLES
from tests.llm.loopback import Loopback, reply
from tests.llm.programs import CHEAT, EXP2, answer
from tests.llm.skills import llm_skill

WORKLOAD, NAIVE_PATH = EXAMPLES / "softmax" / "workload.py", EXAMPLES / "softmax" / "naive.py"


CHEAT_AGAIN = CHEAT.replace("torch.softmax(x, dim=-1)", "torch.softmax(x.float(), dim=-1).to(x.dtype)")


def respond(request: dict) -> dict:
    prompt = request["messages"][-1]["content"]
    if "llm_rewrite.softmax.exp2" in prompt:  # the skill card
        return reply(answer(EXP2), prompt_tokens=1200, completion_tokens=350)
    if "failed the correctness gate" in prompt:
        return reply(answer(CHEAT_AGAIN, "softmax in float32"), prompt_tokens=900, completion_tokens=345)
    return reply(answer(CHEAT, "use the library softmax"), prompt_tokens=800, completion_tokens=340)  # the note


@pytest.mark.interpreter
def test_llm_compare_runs_both_arms_under_one_budget(tmp_path, monkeypatch):
    library = tmp_path / "library"
    with Library(library) as lib:
        lib.save(llm_skill("exp2", 0))
    wl = load_workload(WORKLOAD)
    entry = MemoryEntry(features(load_program(NAIVE_PATH), wl), "fast_math", {}, 1.3, True, "softmax:blind")
    memory = tmp_path / "memory.json"
    memory.write_text(json.dumps([asdict(entry)]))
    out = tmp_path / "compare"
    with Loopback(default=respond) as server:
        monkeypatch.setenv("KLINEAGE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("KLINEAGE_LLM_MODEL", "loopback-model")
        result = CliRunner().invoke(
            main,
            [
                "llm-compare",
                str(WORKLOAD),
                str(NAIVE_PATH),
                "--library",
                str(library),
                "--memory",
                str(memory),
                "--budget",
                "4",
                "--max-calls",
                "3",
                "--device",
                "cpu",
                "--out",
                str(out),
                "--json",
            ],
        )
        prompts = server.prompts()
    assert result.exit_code == 0, result.output + str(result.exception)
    s = json.loads(result.output)
    skills, notes = s["arms"]["klineage"], s["arms"]["memory"]
    assert s["model"] == "loopback-model" and s["budget"] == 4 and s["max_calls"] == 3
    # skills: the card materialized once and kept
    assert (skills["kept"], skills["failed_gate"], skills["model_calls"], skills["evaluations"]) == (1, 0, 1, 2)
    assert skills["changed"] and (skills["prompt_tokens"], skills["completion_tokens"]) == (1200, 350)
    # memory: the note's answer cheats, fails the gates, its repair too (one repair), nothing kept
    assert (notes["kept"], notes["failed_gate"], notes["model_calls"], notes["evaluations"]) == (0, 2, 2, 3)
    assert not notes["changed"] and notes["failed_share"] == 1.0
    assert notes["rejected_replies"] == {"gate:torch_compute": 2}
    assert any("Remembered outcome #0" in p and "fast_math" in p for p in prompts)
    assert all(r["timed"] is False and r["speedup"] is None for r in s["arms"].values())
    text = (out / "compare.md").read_text()
    assert "| klineage |" in text and "| memory |" in text and "No GPU: nothing was timed" in text
    assert "describe no model" in text
    for arm in ("klineage", "memory"):
        t = json.loads((out / arm / "trajectory.json").read_text())
        assert t["method"] == arm and t["llm"]["calls"] == s["arms"][arm]["model_calls"] and t["budget"] == 4
