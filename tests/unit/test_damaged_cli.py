"""The command line on damaged state: a damaged skill is one error line and exit code 2 where it is what was asked
for (`skills show`), one warning line where the command goes on without it (`skills list`, `skills export`); a
library without its index is re-indexed with one warning line; a folder that is no library is one error line. Never
a traceback."""

import json
import os
import re
from pathlib import Path

from click.testing import CliRunner

from klineage.cli import main
from klineage.workload import UserError
from tests.unit.test_damaged_library import make_library


def _run(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def _lines(text: str) -> list[str]:
    """The warnings and errors said, without the progress lines (timestamped) that come between them."""
    return [line for line in text.splitlines() if line.strip() and not re.match(r"\d\d:\d\d:\d\d ", line)]


def test_skills_show_of_a_damaged_skill_is_one_error_line(tmp_path):
    make_library(tmp_path)
    bad = tmp_path / "skills" / "b.s1.json"
    bad.write_bytes(os.urandom(500))
    result = _run("skills", "show", "b.s1", "--library", tmp_path)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = _lines(result.stderr)
    assert line.startswith(f"error: skill file {bad} is damaged: ")
    shown = _run("skills", "show", "a.s0", "--library", tmp_path)  # the others still show
    assert shown.exit_code == 0 and shown.stdout.startswith("# a.s0 in k") and shown.stderr == ""


def test_skills_list_and_export_go_on_without_a_damaged_skill_and_say_so(tmp_path):
    make_library(tmp_path)
    bad = tmp_path / "skills" / "a.s0.json"
    bad.write_text(json.dumps({k: v for k, v in json.loads(bad.read_text()).items() if k != "location"}))
    listed = _run("skills", "list", "--library", tmp_path, "--json")
    assert listed.exit_code == 0 and [s["id"] for s in json.loads(listed.stdout)] == ["b.s1", "c.s2"]
    (line,) = _lines(listed.stderr)
    assert line == f"warning: skill file {bad} is damaged: missing field location; left out"
    table = _run("skills", "list", "--library", tmp_path)
    assert table.exit_code == 0 and "2 skills" in table.stdout and len(_lines(table.stderr)) == 1
    exported = _run("skills", "export", tmp_path / "out", "--library", tmp_path)
    assert exported.exit_code == 0 and "2 SKILL.md folders" in exported.stdout
    assert _lines(exported.stderr) == [line]


def test_a_library_without_its_index_is_reindexed_with_one_warning(tmp_path):
    make_library(tmp_path)
    (tmp_path / "index.sqlite").unlink()
    listed = _run("skills", "list", "--library", tmp_path, "--json")
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)) == 3
    (line,) = _lines(listed.stderr)
    assert line.startswith(f"warning: the skill library {tmp_path} has no index: indexed its 3 skill files")
    again = _run("skills", "list", "--library", tmp_path, "--json")
    assert again.exit_code == 0 and again.stderr == ""


def test_a_damaged_index_is_moved_aside_with_one_warning(tmp_path):
    make_library(tmp_path)
    index = tmp_path / "index.sqlite"
    index.write_bytes(index.read_bytes()[:3000])
    listed = _run("skills", "list", "--library", tmp_path, "--kind", "guard", "--json")
    assert listed.exit_code == 0 and [s["id"] for s in json.loads(listed.stdout)] == ["c.s2"]
    (line,) = _lines(listed.stderr)
    (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert line.startswith(f"warning: the skill library's index {index} is damaged") and str(aside) in line


def test_a_folder_that_is_no_library_is_one_error_line(tmp_path):
    (tmp_path / "other").mkdir()
    for command in (["list"], ["show", "a.s0"], ["export", tmp_path / "out"]):
        result = _run("skills", *command, "--library", tmp_path / "other")
        assert result.exit_code == 2 and _lines(result.stderr) == [
            f"error: no skill library at {tmp_path / 'other'} (run `klineage mine` first or pass --library)"
        ]
    assert list((tmp_path / "other").iterdir()) == []  # nothing made there


SOFTMAX = Path(__file__).parents[2] / "src" / "klineage" / "examples" / "softmax"


def test_optimize_goes_on_without_a_damaged_skill_and_refuses_a_folder_that_is_no_library(tmp_path, monkeypatch):
    import klineage.optimize

    def walk(workload, program, proposer, *args, **kwargs):  # where the walk would start its sandbox
        raise UserError(f"walk reached with {sorted(s.id for s in proposer.skills)}")

    monkeypatch.setattr(klineage.optimize, "optimize", walk)
    make_library(tmp_path / "lib")
    bad = tmp_path / "lib" / "skills" / "a.s0.json"
    bad.write_text("{")
    args = ("optimize", SOFTMAX / "workload.py", SOFTMAX / "naive.py", "--device", "cpu", "--library")
    result = _run(*args, tmp_path / "lib")
    assert result.exit_code == 2
    assert _lines(result.stderr) == [
        f"warning: skill file {bad} is damaged: not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)); left out",
        "error: walk reached with ['b.s1']",
    ]
    (tmp_path / "other").mkdir()
    refused = _run(*args, tmp_path / "other")
    assert refused.exit_code == 2 and len(_lines(refused.stderr)) == 1 and "no skill library" in refused.stderr
