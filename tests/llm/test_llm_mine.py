"""`klineage mine --llm` end to end through the loopback server: after the mechanical walk, the "model" proposes a
simplification beyond the catalog; an unusable reply is counted and skipped, the proposal is gated and probed like
any step, and the accepted diff becomes an `llm_rewrite` skill with the model's stated intent and probed
conditions. The replies are scripted: nothing here measures a model."""

import json

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.library import Library
from tests.conftest import EXAMPLES
from tests.llm.loopback import Loopback
from tests.llm.programs import EXP2, NAIVE, write

WORKLOAD = EXAMPLES / "softmax" / "workload.py"
INTENT = "exp2 with the log2(e) scale folded into the subtraction: one multiply instead of exp's range reduction"
SIMPLIFIED = f"INTENT: {INTENT}\nCONDITIONS: tolerance, divisible_by_block, not_a_predicate\n\n```python\n{NAIVE}```"


@pytest.mark.interpreter
def test_mine_with_a_model_beyond_the_catalog(tmp_path, monkeypatch):
    expert = write(tmp_path / "expert_exp2.py", EXP2)
    library = tmp_path / "library"
    script = ["I would rather not rewrite this kernel.", SIMPLIFIED, "NONE"]
    with Loopback(script) as server:
        monkeypatch.setenv("KLINEAGE_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("KLINEAGE_LLM_MODEL", "loopback-model")
        # --max-steps 0: no mechanical step (the catalog walk is tested elsewhere); the model walks from the expert
        result = CliRunner().invoke(
            main,
            [
                "mine",
                str(WORKLOAD),
                str(expert),
                "--library",
                str(library),
                "--device",
                "cpu",
                "--max-steps",
                "0",
                "--llm",
                "--json",
            ],
        )
        prompts = server.prompts()
    assert result.exit_code == 0, result.output + str(result.exception)
    out = json.loads(result.output)
    assert len(prompts) == 3 and "Undo exactly ONE" in prompts[0] and "tl.exp2(" in prompts[0]
    assert "an unusable reply: no_code_block" in prompts[1] and "accepted" in prompts[2]
    (step,) = out["llm_lineage"]["steps"]
    assert step["accepted"] and step["transform"] == "llm_rewrite" and step["site"]["function"] == "softmax_kernel"
    assert out["llm"]["calls"] == 3 and out["llm"]["rejected"] == {"no_code_block": 1}
    (skill_id,) = [s for s in out["skills"] if s.startswith("llm_rewrite.")]
    with Library(library) as lib:
        skill = lib.get(skill_id)
    assert skill.intent == INTENT and skill.transform["tag"] == "L" and skill.provenance["proposed_by"] == "model"
    assert "tl.exp(x - x_max)" in skill.location["before"] and "tl.exp2(" in skill.location["after"]
    assert "+    num = tl.exp2(" in skill.transform["params"]["diff"]
    conditions = {c["predicate"]: c for c in skill.conditions}
    assert set(conditions) == {"tolerance", "divisible_by_block"}  # named by the model, within the vocabulary
    assert conditions["divisible_by_block"]["status"] == "not_a_condition"  # decided by the probe, not the model
    assert all(c["status"] != "unprobed" for c in skill.conditions)
