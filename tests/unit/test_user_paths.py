"""What a new user meets first (issue 31): one default library per data directory, read by every command when no
--library is given, with one line on what to do where there is none yet; an inputs file with just get_inputs();
errors that name the user's files; errors shown whole, or cut at a line (or space) with how much was left out."""

import re

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.config import Settings, clip
from klineage.program import Program, load_program
from klineage.reference import load_self_reference
from klineage.workload import WorkloadError
from tests.conftest import EXAMPLES

RMS = EXAMPLES / "rmsnorm"
NO_LIBRARY = re.compile(r"^error: no skill library yet in (\S+) \(KLINEAGE_HOME\): run `klineage demo`.*`klineage mine")


def _errors(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    "command",
    [
        ["skills", "list"],
        ["skills", "show", "some.skill"],
        ["optimize", str(RMS / "workload.py"), str(RMS / "naive.py"), "--device", "cpu"],
    ],
)
def test_without_a_library_a_command_says_what_to_do_in_one_line(command, tmp_path, monkeypatch):
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2
    (line,) = _errors(result)
    assert NO_LIBRARY.match(line) and NO_LIBRARY.match(line).group(1) == str(tmp_path / "home"), line
    assert "--library " + str(tmp_path) not in line  # never a path the user did not name


def test_demo_writes_the_one_library_that_the_other_commands_read(tmp_path, monkeypatch):
    import klineage.mining

    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path))
    seen = []

    def stop_at_mining(library, *args, **kwargs):
        seen.append(library.root)
        raise WorkloadError("stopped here")

    monkeypatch.setattr(klineage.mining, "mine_into", stop_at_mining)
    monkeypatch.setattr("klineage.sandbox.Sandbox.__enter__", lambda self: self)
    monkeypatch.setattr("klineage.sandbox.Sandbox.__exit__", lambda self, *exc: None)
    result = CliRunner().invoke(main, ["demo", "--device", "cpu"])
    assert result.exit_code == 2 and "stopped here" in result.output
    assert seen == [Settings.from_env().library_dir] == [tmp_path / "library"]


def test_an_inputs_file_with_just_get_inputs_makes_a_workload_and_errors_name_the_users_files(tmp_path):
    program = load_program(RMS / "naive.py")
    inputs = tmp_path / "inputs.py"
    inputs.write_text(
        "import torch\nrows, cols = 4, 64\ndef get_inputs():\n    return [torch.randn(8, 64), torch.ones(64)]\n"
    )
    wl = load_self_reference(inputs, program, tmp_path / "home")
    assert wl.cases == {"default": {}}
    bad = tmp_path / "bad.py"
    for text, said in [
        ("def get_inputs(:\n", "syntax error at line 1"),
        ("import no_such_module_here\n", "failed to import: ModuleNotFoundError"),
        ("X = 1\n", "defines neither make_inputs(case, seed) nor get_inputs()"),
        ("def get_inputs():\n    return []\nTOLERANCES = {'float32': 3}\n", "TOLERANCES['float32']"),
    ]:
        bad.write_text(text)
        with pytest.raises(WorkloadError) as error:
            load_self_reference(bad, program, tmp_path / "home")
        assert str(error.value).startswith(f"inputs file {bad}: ") and said in str(error.value)
        assert "self_reference" not in str(error.value)  # never the generated workload
    # the original is not imported here (only a confined process runs it: its import error fails the check,
    # tests/interpreter/test_confined_reference.py); one that does not parse is refused now, named as the user's
    broken = tmp_path / "broken.py"
    broken.write_text("def forward(:\n" + (RMS / "naive.py").read_text())
    with pytest.raises(WorkloadError) as error:
        load_self_reference(inputs, Program("broken", broken.read_text(), path=broken), tmp_path / "home")
    assert str(error.value) == f"the original program {broken}: syntax error at line 1: invalid syntax"


def test_clip_keeps_whole_lines_or_words_and_says_how_much_was_left_out():
    error = (
        "at 3:11:\n    offs = pid * BLOCK + tl.arange(0, BLOCKX)\n               ^\nNameError: BLOCKX is not defined"
    )
    assert clip(error, 1000) == error
    head = clip(error, 60)
    assert head == "at 3:11:\n    offs = pid * BLOCK + tl.arange(0, BLOCKX)\n[50 characters left out]"
    tail = clip(error, 60, tail=True)
    assert tail == "[55 characters left out]\n               ^\nNameError: BLOCKX is not defined"
    line = clip("offs = pid * BLOCK + tl.arange(0, BLOCK)", 25)
    assert line == "offs = pid * BLOCK + [20 characters left out]"


def test_the_plots_extra_is_real_and_a_timed_run_without_it_says_so(monkeypatch):
    import importlib.util
    import tomllib

    from klineage.bench.report import plots_missing
    from tests.conftest import ROOT

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("matplotlib") for req in extras["plots"])
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else object())
    assert plots_missing({"stamp": {"timed": False}}) == ""  # nothing timed: nothing to plot
    said = plots_missing({"stamp": {"timed": True}})
    assert 'pip install -e ".[plots]"' in said and "matplotlib" in said
