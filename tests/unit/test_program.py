import pytest

from klineage.program import Program, ProgramError, load_program
from tests.conftest import FIXTURES


def test_load_file_and_hash_is_normalized(tmp_path):
    p = load_program(FIXTURES / "scale_add_ok.py")
    assert p.modules == {} and p.name == "scale_add_ok"
    commented = tmp_path / "c.py"
    commented.write_text("# a comment\n" + p.source.replace("\n\n\n", "\n\n"))
    assert load_program(commented).hash == p.hash


def test_directory_program_with_module_overrides(tmp_path):
    d = tmp_path / "prog"
    (d / "modules").mkdir(parents=True)
    (d / "program.py").write_text("class ModelNew:\n    pass\n")
    (d / "modules" / "pkg.sub.mod.py").write_text("X = 1\n")
    p = load_program(d)
    assert p.modules == {"pkg.sub.mod": "X = 1\n"}
    assert p.with_module("pkg.sub.mod", "X = 2\n").hash != p.hash
    written = p.write(tmp_path / "out")
    assert (tmp_path / "out" / "modules" / "pkg.sub.mod.py").read_text() == "X = 1\n"
    assert written.read_text() == p.source


@pytest.mark.parametrize(
    "text, message", [("def f(:\n", "does not parse: line 1"), ("class Model:\n    pass\n", "no class ModelNew")]
)
def test_bad_programs_are_one_line(tmp_path, text, message):
    path = tmp_path / "p.py"
    path.write_text(text)
    with pytest.raises(ProgramError, match=message) as err:
        load_program(path)
    assert "\n" not in str(err.value)


def test_missing_program(tmp_path):
    with pytest.raises(ProgramError, match="no such file"):
        load_program(tmp_path / "missing.py")
    (tmp_path / "d").mkdir()
    with pytest.raises(ProgramError, match="needs program.py"):
        load_program(tmp_path / "d")


def test_install_serves_overrides_without_touching_the_original(tmp_path):
    import json
    import sys

    from klineage.program import install

    original = json.__file__
    before = open(original).read()
    program = Program(
        "p",
        "import json.decoder as d\nclass ModelNew:\n    marker = d.MARKER\n",
        {"json.decoder": "MARKER = 'rewritten'\n"},
    )
    saved = sys.modules.get("json.decoder")
    try:
        module = install(program, tmp_path / "w")
        assert module.ModelNew.marker == "rewritten"
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "ModuleOverrides"]
        if saved is not None:
            sys.modules["json.decoder"] = saved
    assert open(original).read() == before
