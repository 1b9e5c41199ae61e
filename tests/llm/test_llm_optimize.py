"""`klineage optimize --materializer llm` end to end through the loopback server: skills no mechanical rewrite can
apply are materialized by the "model", malformed replies are rejected and counted without a gate evaluation, a
cheating program fails the gates and is repaired, and the trajectory and the report carry model calls and tokens.
The replies are scripted: nothing here measures a model."""

import json

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.library import Library
from tests.conftest import EXAMPLES
from tests.llm.loopback import Loopback, reply
from tests.llm.programs import CHEAT, EXP2, RENAMED, SYNTAX, answer
from tests.llm.skills import llm_skill

WORKLOAD, NAIVE_PATH = EXAMPLES / "softmax" / "workload.py", EXAMPLES / "softmax" / "naive.py"

# per skill (curriculum order: step 4 first), what the scripted model answers
SCRIPT = {
    "a.s4": "Softmax is already optimal, I would not change anything.",  # no code block
    "b.s3": answer(SYNTAX),
    "c.s2": answer(RENAMED),
    "d.s1": "Let me think. " * 20_000,  # endless text
    "e.s0": answer(CHEAT, "use the library softmax"),  # a cheat: fails the gates, then repaired
}


def respond(request: dict) -> dict:
    prompt = request["messages"][-1]["content"]
    if "failed the correctness gate" in prompt:
        return reply(answer(EXP2), prompt_tokens=900, completion_tokens=300)
    for key, text in SCRIPT.items():
        if f"llm_rewrite.softmax.{key}" in prompt:
            return reply(text, prompt_tokens=1000, completion_tokens=min(len(text) // 4, 4000))
    return reply("nothing to do", 10, 3)


@pytest.mark.interpreter
def test_optimize_with_the_llm_materializer_end_to_end(tmp_path, monkeypatch):
    library = tmp_path / "library"
    with Library(library) as lib:
        for key in SCRIPT:
            name, step = key.split(".s")
            lib.save(llm_skill(name, int(step)))
    out = tmp_path / "out"
    with Loopback(default=respond) as server:
        monkeypatch.setenv("KLINEAGE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("KLINEAGE_LLM_MODEL", "loopback-model")
        result = CliRunner().invoke(
            main,
            [
                "optimize",
                str(WORKLOAD),
                str(NAIVE_PATH),
                "--library",
                str(library),
                "--materializer",
                "llm",
                "--budget",
                "5",
                "--device",
                "cpu",
                "--out",
                str(out),
                "--json",
            ],
        )
        prompts = server.prompts()
    assert result.exit_code == 0, result.output + str(result.exception)
    t = json.loads(result.output)
    # five materializations (four rejected before the gates) and one repair
    assert len(prompts) == 6 and "failed the correctness gate" in prompts[-1]
    assert [a["outcome"] for a in t["attempts"]] == ["failed_gate", "unmeasured"]
    cheat, fixed = t["attempts"]
    assert cheat["candidate"]["origin"] == "llm_rewrite.softmax.e.s0"
    assert any(v["gate"] == "correctness" and v["status"] == "fail" for v in cheat["verdicts"])
    assert fixed["kept"] and fixed["candidate"]["label"].startswith("repair of llm: llm_rewrite")
    assert "contiguous: holds" in fixed["candidate"]["decided_by"][0]
    assert t["evaluations"] == 3 and t["best_hash"] != t["start_hash"]
    llm = t["llm"]
    assert llm["model"] == "loopback-model" and llm["calls"] == 6 and llm["failed_calls"] == 0
    assert llm["prompt_tokens"] == 5 * 1000 + 900 and llm["completion_tokens"] > 300
    rejected = llm["rejected"]
    assert {k: rejected[k] for k in ("no_code_block", "syntax_error", "kernel_renamed", "too_long")} == {
        "no_code_block": 1,
        "syntax_error": 1,
        "kernel_renamed": 1,
        "too_long": 1,
    }
    assert [k for k in rejected if k.startswith("gate:")] and sum(rejected.values()) == 5
    assert "tl.exp2(" in (out / "program.py").read_text() and "torch.softmax" not in (out / "program.py").read_text()
    saved = json.loads((out / "trajectory.json").read_text())
    assert saved["llm"]["calls"] == 6
    text = (out / "report.md").read_text()
    assert "Model `loopback-model`" in text and "6 calls" in text and "syntax_error 1" in text
    assert "No GPU: no time was taken" in text


def test_the_llm_materializer_without_a_model_is_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("KLINEAGE_LLM_MODEL", raising=False)
    with Library(tmp_path / "library") as lib:
        lib.save(llm_skill("a", 0))
    args = [
        "optimize",
        str(WORKLOAD),
        str(NAIVE_PATH),
        "--library",
        str(tmp_path / "library"),
        "--materializer",
        "llm",
        "--device",
        "cpu",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "KLINEAGE_LLM_MODEL" in result.output
