"""Trust by provenance: the user's own program, installed modules and mechanical rewrites are trusted (the policy
informs), what a model or an agent wrote is judged (the policy refuses), and `check` refuses before anything runs:
no sandbox is started here."""

import json

import pytest
from click.testing import CliRunner

from klineage import check as check_module
from klineage.check import check
from klineage.cli import main as cli
from klineage.gates import Verdict
from klineage.policy import changed_lines, judge_program, unmodified_installed
from klineage.policy.names import installed_source
from klineage.program import Program, load_program
from klineage.suites import SUITES
from klineage.workload import load_workload

FOLDER = SUITES["heldout"] / "bias_gelu"
CHEAT = "import os\n"  # prepended: line 1 of the main file


def _naive() -> Program:
    return load_program(FOLDER / "naive.py")


def _cheat() -> Program:
    honest = _naive()
    return honest.with_source("program", CHEAT + honest.source)


def test_a_loaded_program_is_trusted_and_the_policy_does_not_parse_it():
    program = _cheat()
    assert program.trusted
    report = judge_program(program)
    assert (report.judged, report.findings, report.information, report.refused) == ((), (), (), False)


def test_a_trusted_program_is_informed_never_refused():
    report = judge_program(_cheat(), inform=True)
    assert not report.refused
    assert [(f.rule, f.line) for f in report.information] == [("import", 1)]


def test_written_by_marks_every_module_and_rewrites_keep_it():
    program = _cheat().written_by("unchecked")
    assert program.untrusted == {"program"} and program.author == "unchecked"
    rewritten = program.with_source("program", program.source + "\nX = 1\n")
    assert rewritten.untrusted == {"program"}  # a mechanical rewrite of untrusted code stays untrusted
    assert rewritten.hash != program.hash and program.hash == _cheat().hash  # trust is not part of the hash
    with pytest.raises(ValueError):
        program.written_by("someone")


def test_an_untrusted_program_is_refused_naming_rule_and_line():
    report = judge_program(_cheat().written_by("agent"))
    assert report.refused and report.judged == ("program",)
    assert str(report.findings[0]).startswith("program line 1: import: import os")
    assert judge_program(_naive().written_by("agent")).refused is False


def test_a_models_rewrite_is_judged_on_the_lines_it_changed():
    """A model rewrites a module whose trusted text breaks the policy (an installed module imports os): only what
    the model changed can refuse it."""
    base = "import os\nimport torch\n\n\ndef f(x):\n    return x\n"
    program = _naive().with_module("kern.ops", base)
    honest = program.rewritten_by("model", "kern.ops", base.replace("return x", "return x + 0"))
    report = judge_program(honest)
    assert not report.refused and report.judged == ("kern.ops",) and report.information
    cheat = program.rewritten_by("model", "kern.ops", base.replace("return x", "return os.system('true')"))
    assert [(f.rule, f.line) for f in judge_program(cheat).findings] == [("import", 6)]
    again = cheat.rewritten_by("model", "kern.ops", base)  # the base is the trusted text, not the model's
    assert again.base == {"kern.ops": base}


def test_changed_lines():
    assert changed_lines("a\nb\nc\n", "a\nB\nc\nd\n") == {0, 2, 4}


def test_an_installed_module_handed_in_unmodified_is_trusted():
    name = "liger_kernel.ops.rms_norm"
    source = installed_source(name)
    assert source is not None and unmodified_installed(name, source)
    program = _naive().with_module(name, source).written_by("agent")
    report = judge_program(program)
    assert report.judged == ("program",) and not report.refused
    changed = program.with_source(name, source + "\nimport os\n")
    assert name in judge_program(changed).judged


def test_check_refuses_before_the_sandbox_and_the_cache(settings):
    report = check(load_workload(FOLDER / "workload.py"), _cheat().written_by("model"), settings, "cpu")
    assert [(v.gate, v.status, v.code) for v in report.verdicts] == [
        ("compile", "fail", "static_ban"),
        ("correctness", "skip", "static_ban"),
        ("profile", "skip", "static_ban"),
    ]
    assert "program line 1: import" in report.verdicts[0].reason
    assert not report.passed and report.as_dict()["policy"]["refused"]


def test_check_runs_the_gates_of_an_untrusted_program_the_policy_passes(monkeypatch, settings):
    monkeypatch.setattr(check_module, "run_gate", lambda gate, request, sandbox, alone=False: Verdict(gate, "pass"))
    report = check(
        load_workload(FOLDER / "workload.py"),
        _naive().written_by("agent"),
        settings.replace(use_cache=False),
        "cpu",
        ("correctness",),
        sandbox=object(),
    )
    assert report.passed and report.policy.judged == ("program",) and not report.policy.refused


def test_klineage_check_judges_untrusted_by_default(tmp_path):
    cheat = tmp_path / "cheat.py"
    cheat.write_text(_cheat().source)
    result = CliRunner().invoke(cli, ["check", str(FOLDER / "workload.py"), str(cheat), "--device", "cpu"])
    assert result.exit_code == 1, result.output
    assert "static_ban" in result.output and "policy: untrusted (unchecked)" in result.output


def test_klineage_check_trusted_opts_out_and_says_so(tmp_path, monkeypatch):
    seen, real = {}, check_module.check

    def fake_check(wl, prog, settings, dev, gates, on_gate=None, inform=False):
        seen.update(trusted=prog.trusted, inform=inform)
        report = real(wl, prog.written_by("agent"), settings, dev, gates)  # refused: nothing runs
        return check_module.CheckReport(**{**report.__dict__, "policy": judge_program(prog, inform)})

    monkeypatch.setattr(check_module, "check", fake_check)
    cheat = tmp_path / "cheat.py"
    cheat.write_text(_cheat().source)
    args = ["check", str(FOLDER / "workload.py"), str(cheat), "--device", "cpu", "--trusted"]
    result = CliRunner().invoke(cli, args)
    assert seen == {"trusted": True, "inform": True}
    assert "--trusted opts this program out" in result.output and "information: program line 1" in result.output
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert json.loads(result.output)["policy"]["trusted"] is True


def test_the_mcp_check_marks_what_an_agent_hands_in_untrusted(settings, tmp_path):
    from klineage.mcp_server import Tools

    tools = Tools(tmp_path / "library", settings)
    out = tools.check_program(str(FOLDER / "workload.py"), source=_cheat().source, device="cpu")
    assert out["passed"] is False and out["verdicts"][0]["code"] == "static_ban"
    assert out["policy"]["author"] == "agent"
    tools.close()


class _ScriptedClient:
    """Just enough of LLMClient for one materialization: every reply is `text`."""

    def __init__(self, text: str):
        from klineage.llm import LLMConfig

        self.text, self.config, self.rejected = text, LLMConfig("scripted"), []

    def chat(self, messages):
        from klineage.llm import Reply

        return Reply(self.text, 1, 1, "stop")

    def exhausted(self) -> bool:
        return False

    def reject(self, reason: str) -> None:
        self.rejected.append(reason)


def test_what_the_llm_materializer_writes_is_judged(settings):
    from klineage.llm_propose import Guidance, LLMProposer
    from klineage.proposers.base import Proposer

    workload, naive = load_workload(FOLDER / "workload.py"), _naive()
    rewrite = naive.source.replace("import torch\n", "import torch\nimport os\n", 1)
    assert rewrite != naive.source
    client = _ScriptedClient(f"INTENT: a rewrite\n\n```python\n{rewrite}```\n")
    guidance = [Guidance("skill-1", "exp2_folded_scale", "fold the scale", 1.1)]
    base = Proposer(workload, settings, "cpu")
    base.propose = lambda program: []
    (candidate,) = LLMProposer(base, client, lambda program: guidance).propose(naive)
    assert candidate.program.untrusted == {"program"} and candidate.program.author == "model"
    report = judge_program(candidate.program)
    assert [f.rule for f in report.findings] == ["import"]  # only the line the model added
