"""`klineage audit` and the CLI's contract: tables, --json, one-line errors with exit code 2, exit 1 on a failing
gate."""

import json

import pytest
from click.testing import CliRunner

from klineage.audit import audit
from klineage.cli import main
from klineage.workload import load_workload
from tests.conftest import EXAMPLES, FIXTURES

pytestmark = pytest.mark.interpreter


def test_weak_workload_is_flagged(settings):
    report = audit(load_workload(FIXTURES / "weak.py"), settings)
    assert report.weak
    assert "output 0: zeros" in report.passing_fakes


@pytest.mark.sweep
@pytest.mark.parametrize("folder", ["softmax", "rmsnorm", "matmul", "cross_entropy", "swiglu"])
def test_bundled_workloads_are_strong(folder, settings):
    report = audit(load_workload(EXAMPLES / folder / "workload.py"), settings)
    assert not report.weak, report.passing_fakes
    assert report.trials >= 4 and len(report.tried) >= 3


def test_audit_cli_exit_codes():
    runner = CliRunner()
    weak = runner.invoke(main, ["audit", str(FIXTURES / "weak.py")])
    assert weak.exit_code == 1 and "weak check" in weak.output
    strong = runner.invoke(main, ["audit", str(FIXTURES / "scale_add.py"), "--json"])
    assert strong.exit_code == 0 and json.loads(strong.output)["weak"] is False


def test_check_cli_json_and_table():
    runner = CliRunner()
    args = ["check", str(FIXTURES / "scale_add.py"), str(FIXTURES / "scale_add_ok.py"), "--device", "cpu"]
    result = runner.invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["passed"] and [v["gate"] for v in report["verdicts"]] == ["compile", "correctness", "profile"]
    table = runner.invoke(main, args)
    assert table.exit_code == 0 and "correctness" in table.output and "no time was taken" in table.output


def test_check_cli_fails_with_exit_1(tmp_path):
    bad = tmp_path / "torchy.py"
    bad.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x, y):\n        return 2 * x + y\n"
    )
    result = CliRunner().invoke(main, ["check", str(FIXTURES / "scale_add.py"), str(bad), "--device", "cpu"])
    assert result.exit_code == 1 and "torch_compute" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["check", "missing.py", "x.py"], "workload missing.py: no such file"),
        (["check", "{scale_add}", "missing.py"], "program missing.py: no such file"),
        (["check", "{scale_add}", "{bad_program}"], "does not parse"),
        (["check", "{bad_workload}", "{ok}"], "defines no class Model"),
        (["check", "{scale_add}", "{ok}", "--gates", "speed"], "unknown gate 'speed'"),
        (["audit", "{bad_workload}"], "defines no class Model"),
        (["mine", "{scale_add}", "{ok}", "--device", "cpu", "--walk-device", "cuda"], "only a walk made on the CPU"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "bad_program.py").write_text("class ModelNew(:\n")
    (tmp_path / "bad_workload.py").write_text("def get_inputs():\n    return []\n")
    paths = {
        "scale_add": FIXTURES / "scale_add.py",
        "ok": FIXTURES / "scale_add_ok.py",
        "bad_program": tmp_path / "bad_program.py",
        "bad_workload": tmp_path / "bad_workload.py",
    }
    result = CliRunner().invoke(main, [a.format(**paths) for a in args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cuda_device_without_gpu_is_a_user_error():
    from klineage.config import cuda_available

    if cuda_available():
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(
        main, ["check", str(FIXTURES / "scale_add.py"), str(FIXTURES / "scale_add_ok.py"), "--device", "cuda"]
    )
    assert result.exit_code == 2 and "no CUDA GPU" in result.output


def test_mine_and_skills_cli(tmp_path):
    """mine writes a library that skills list/show/export read; a missing library is a one-line user error."""
    runner = CliRunner()
    library = tmp_path / "lib"
    missing = runner.invoke(main, ["skills", "list", "--library", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no skill library" in missing.output
    planted = [str(FIXTURES / "planted" / "workload.py"), str(FIXTURES / "planted" / "expert.py")]
    options = ["--device", "cpu", "--library", str(library), "--no-probe", "--max-steps", "2", "--json"]
    mined = runner.invoke(main, ["mine", *planted, *options])
    assert mined.exit_code == 0, mined.output
    record = json.loads(mined.output)
    assert len(record["lineage"]["steps"]) == 2 and len(record["skills"]) == 2
    listed = runner.invoke(main, ["skills", "list", "--library", str(library), "--json"])
    assert listed.exit_code == 0 and {s["id"] for s in json.loads(listed.output)} == set(record["skills"])
    table = runner.invoke(main, ["skills", "list", "--library", str(library)])
    assert table.exit_code == 0 and f"{len(record['skills'])} skills (0 timed on a GPU)" in table.output
    assert "unmeasured" in table.output  # mined on the CPU: no effect was timed
    shown = runner.invoke(main, ["skills", "show", record["skills"][0], "--library", str(library)])
    assert shown.exit_code == 0 and "## Conditions" in shown.output and "unprobed" in shown.output
    unknown = runner.invoke(main, ["skills", "show", "no.such.skill", "--library", str(library)])
    assert unknown.exit_code == 2 and len(unknown.output.strip().splitlines()) == 1
    exported = runner.invoke(main, ["skills", "export", str(tmp_path / "out"), "--library", str(library)])
    assert exported.exit_code == 0 and len(list((tmp_path / "out").glob("*/SKILL.md"))) == 2
    bad_module = runner.invoke(main, ["mine", *planted, "--module", "no_such_package.ops"])
    assert bad_module.exit_code == 2 and "not installed" in bad_module.output
