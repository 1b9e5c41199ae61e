"""The judge greets its candidate and the reference process beside it together (gates.candidate.greet_together):
both are asked before either answer is awaited, so the two import their programs side by side, and the reference's
end is its own failure, not the candidate's. Fake processes on real pipes: a thread plays both."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from klineage.gates.candidate import Candidate, CandidateGone, greet_together
from klineage.wire import read_frame, write_frame

HELLO = {"isolation": {}, "isolation_line": "isolation: test"}


def _process(tmp_path, name: str) -> tuple[Candidate, int, int, subprocess.Popen]:
    """A Candidate handle whose other ends (requests in, answers out) the test holds; its pid a real child of
    its own session, so ending it (`_ended`) kills nothing else."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    private = tmp_path / name
    private.mkdir()
    return Candidate(child.pid, down_w, up_r, private), down_r, up_w, child


def test_both_are_asked_before_either_answer_is_awaited(tmp_path):
    candidate, cand_in, cand_out, c1 = _process(tmp_path, "candidate")
    reference, ref_in, ref_out, c2 = _process(tmp_path, "reference")
    asked = {}

    def both():  # a judge that waited for one answer before asking the other would leave one hello unasked
        import select

        waiting = {cand_in, ref_in}
        while waiting:
            ready, _, _ = select.select(list(waiting), [], [], 3.0)
            if not ready:
                break
            for fd in ready:
                asked[fd] = read_frame(fd).meta["op"]
                waiting.discard(fd)
        asked["both before any answer"] = not waiting
        write_frame(ref_out, {}, {**HELLO, "who": "reference"})
        # a turn asked for during the import is served while the other's hello is pending
        write_frame(cand_out, {}, {"turn": "off", "enter": True})
        assert read_frame(cand_in).meta == {"granted": "off"}
        write_frame(cand_out, {}, {"turn": "off", "enter": False})
        assert read_frame(cand_in).meta == {"granted": "off"}
        write_frame(cand_out, {}, {**HELLO, "who": "candidate"})
        if ref_in not in asked:  # the sequential judge asks the reference only now
            asked[ref_in] = read_frame(ref_in).meta["op"]

    player = threading.Thread(target=both, daemon=True)
    player.start()
    greet_together(candidate, [reference])
    player.join(timeout=10)
    assert not player.is_alive() and asked == {cand_in: "hello", ref_in: "hello", "both before any answer": True}
    assert candidate.greet()["who"] == "candidate" and reference.greet()["who"] == "reference"  # no second hello
    for p in (c1, c2):
        p.kill()
        p.wait()


def test_a_reference_that_ended_is_its_own_failure(tmp_path):
    candidate, cand_in, cand_out, c1 = _process(tmp_path, "candidate")
    reference, ref_in, ref_out, c2 = _process(tmp_path, "reference")
    os.close(ref_out)  # the reference process died before its hello
    write_frame(cand_out, {}, HELLO)
    greet_together(candidate, [reference])
    assert candidate.hello == HELLO and reference.gone is not None
    with pytest.raises(CandidateGone):
        reference.greet()
    c1.kill()
    c1.wait()


def test_a_candidate_that_ended_fails_the_greeting(tmp_path):
    candidate, cand_in, cand_out, c1 = _process(tmp_path, "candidate")
    reference, ref_in, ref_out, c2 = _process(tmp_path, "reference")
    write_frame(ref_out, {}, HELLO)
    os.close(cand_out)
    with pytest.raises(CandidateGone):
        greet_together(candidate, [reference])
    c2.kill()
    c2.wait()
