"""Turns on a shared GPU with a real candidate: a check lets go of its shared turn while its candidate imports the
program (sandbox.host_work, the default `work` turns), so a timer waiting for the GPU alone is not held up by it;
the comparison arm `yield` keeps the turn there."""

import fcntl
import threading
import time

import pytest

from klineage.config import Settings
from klineage.gates import GateRequest, run_gate
from klineage.program import load_program
from klineage.sandbox import Job
from tests.adversarial.manifest import ROOT, ROWSUM

pytestmark = pytest.mark.gpu

IMPORT_S = 4.0  # the program's import sleeps this long: host work, as FlagGems's import is


def _longest_free_stretch(path: str, running: threading.Event) -> float:
    """While `running` is set: the longest stretch (s) in which the GPU lock could be taken alone."""
    longest, free_since = 0.0, None
    with open(path, "a") as probe:
        while running.is_set():
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                free_since = None
            else:
                fcntl.flock(probe, fcntl.LOCK_UN)
                now = time.monotonic()
                free_since = now if free_since is None else free_since
                longest = max(longest, now - free_since)
            time.sleep(0.02)
    return longest


def _checked_while_polling(request: GateRequest, lock: str, sandbox) -> tuple:
    """The correctness verdict of `request`, and the longest stretch in which the GPU lock was free while it ran."""
    assert sandbox.run(Job("builtins:len", "")).ok  # the warm server up before the polling (its start holds nothing)
    running, stretch = threading.Event(), []
    running.set()
    poller = threading.Thread(target=lambda: stretch.append(_longest_free_stretch(lock, running)))
    poller.start()
    try:
        verdict = run_gate("correctness", request, sandbox)
    finally:
        running.clear()
        poller.join()
    return verdict, stretch[0]


@pytest.mark.parametrize("hold", ["work", "yield"])
def test_a_check_lets_go_of_its_turn_while_its_candidate_imports(hold, gpu_home, tmp_path, sandbox):
    source = (ROOT / "controls/rowsum_ok.py").read_text()
    slow = tmp_path / "rowsum_slow_import.py"
    slow.write_text(f"import time\n\ntime.sleep({IMPORT_S})\n{source}")
    lock = str(tmp_path / "gpu0.lock")
    settings = Settings(data_dir=gpu_home, use_cache=False, seeds=1, gpu_lock=lock, gpu_turns=hold)
    request = GateRequest(str(ROOT / ROWSUM), load_program(slow), "cuda", settings)
    verdict, stretch = _checked_while_polling(request, lock, sandbox)
    assert verdict.passed, verdict.reason
    if hold == "work":  # the import's seconds, less the polling's grain
        assert stretch >= IMPORT_S - 1.0, stretch
    else:  # only the moments before the job took its turn and after it let go
        assert stretch < 1.5, stretch


def test_a_candidate_and_its_reference_import_side_by_side_with_the_turn_let_go(gpu_home, tmp_path, sandbox):
    """A self-reference check whose original program (the reference's, and the candidate's, the same) sleeps at
    import: the two processes import at once (candidate.greet_together), so the reference is ready when the
    candidate is, and the judge's shared turn stays let go through both imports (sandbox._shared_let_go)."""
    from klineage.reference import load_self_reference
    from tests.conftest import FIXTURES

    slow = tmp_path / "needs_cuda_slow_import.py"
    fixture = FIXTURES / "self_reference"
    slow.write_text(f"import time\n\ntime.sleep({IMPORT_S})\n" + (fixture / "needs_cuda.py").read_text())
    original = load_program(slow)
    lock = str(tmp_path / "gpu0.lock")
    settings = Settings(data_dir=gpu_home, use_cache=False, seeds=1, gpu_lock=lock)
    workload = load_self_reference(fixture / "inputs.py", original, settings.data_dir)
    request = GateRequest(str(workload.path), original, "cuda", settings)
    verdict, stretch = _checked_while_polling(request, lock, sandbox)
    assert verdict.passed, verdict.reason
    phases = verdict.evidence["phase_seconds"]
    assert phases["candidate_start"] >= IMPORT_S - 0.5 and phases["reference_start"] < 1.0, phases  # not one after
    assert stretch >= IMPORT_S - 1.0, stretch  # the other
