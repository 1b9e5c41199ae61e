"""A self-reference workload's reference is someone else's program: it is computed in a confined reference process
(gates.confined), CUDA mapped to the CPU there, and never imported in the judge. Its outputs come back as values."""

from pathlib import Path

import pytest

from klineage.check import check
from klineage.program import Program, load_program
from klineage.reference import OriginalNotConfined, load_self_reference
from klineage.workload import import_file
from tests.conftest import FIXTURES

FIXTURE = FIXTURES / "self_reference"


def test_loading_imports_no_original_and_its_model_refuses_an_unconfined_process(settings):
    # the original asks torch.cuda.get_device_name() at import: loading the workload here must not run it
    wl = load_self_reference(FIXTURE / "inputs.py", load_program(FIXTURE / "needs_cuda.py"), settings.data_dir)
    module = import_file(wl.path, "klineage_confined_reference_test")
    assert module.REFERENCE_PROGRAM == str((FIXTURE / "needs_cuda.py").resolve())
    with pytest.raises(OriginalNotConfined, match="runs only in a confined process"):
        module.Model()


@pytest.mark.interpreter
def test_a_reference_that_needs_cuda_at_import_is_computed_confined_on_the_cpu(settings, sandbox):
    original = load_program(FIXTURE / "needs_cuda.py")
    wl = load_self_reference(FIXTURE / "inputs.py", original, settings.data_dir)
    verdict = check(wl, original, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    # the fixture asserts at import that it runs confined: a judge that imported it would fail import_error
    assert verdict.passed, verdict
    wrong = Program("wrong", original.source.replace("* 2 + 1", "* 2 + 1.5"))
    verdict = check(wl, wrong, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert (verdict.status, verdict.code) == ("fail", "mismatch")


# prepended to the needs_cuda fixture: at import, try to create a file in the judge's data directory and to append
# to one there, swallowing the refusal, so the check goes on and shows whether the write landed
WRITER = """TRIED = []
for target, mode in (({planted!r}, "w"), ({state!r}, "a")):
    try:
        with open(target, mode) as f:
            f.write("planted by the reference")
        TRIED.append(target)
    except OSError:
        pass
"""


@pytest.mark.interpreter
def test_the_reference_process_cannot_write_into_the_judges_state(settings, sandbox, tmp_path):
    Path(settings.data_dir).mkdir(parents=True, exist_ok=True)
    state = Path(settings.data_dir) / "judge_state.txt"
    state.write_text("the judge's\n")
    planted = Path(settings.data_dir) / "planted.txt"
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER.format(planted=str(planted), state=str(state)) + (FIXTURE / "needs_cuda.py").read_text())
    wl = load_self_reference(FIXTURE / "inputs.py", load_program(writer), settings.data_dir)
    candidate = load_program(FIXTURE / "needs_cuda.py")
    verdict = check(wl, candidate, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert verdict.passed, verdict  # the reference ran (and computed the right answer) ...
    assert not planted.exists() and state.read_text() == "the judge's\n"  # ... and wrote nothing of the judge's


@pytest.mark.interpreter
def test_an_original_that_does_not_import_fails_as_the_references_error(settings, sandbox, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_here\n" + (FIXTURE / "needs_cuda.py").read_text())
    wl = load_self_reference(FIXTURE / "inputs.py", load_program(broken), settings.data_dir)  # loads: not imported
    candidate = load_program(FIXTURE / "needs_cuda.py")
    verdict = check(wl, candidate, settings, "cpu", ("correctness",), sandbox).verdicts[0]
    assert (verdict.status, verdict.code) == ("fail", "reference_error")
    assert f"the original program {broken}" in verdict.reason and "no_such_module_here" in verdict.reason
