"""The profile gate compares the output of the program's last timed call with the reference, on the CPU here with
plain modules standing in for the program (the gate itself runs on a GPU)."""

import torch

from klineage.config import Tolerance
from klineage.gates.profile import keeping_last, timed_output_finding


class _Workload:
    mutated_inputs = ()
    clobbered_inputs = ()

    def tolerance(self, dtype):
        return Tolerance(1e-4, 1e-5, 1e-5)


class _Double(torch.nn.Module):
    def forward(self, x):
        return 2 * x


class _DoubleUnlessTimed(torch.nn.Module):
    """Right on its first calls (a check), wrong once it has been called many times (a timing loop)."""

    calls = 0

    def forward(self, x):
        self.calls += 1
        return 2 * x if self.calls < 5 else torch.zeros_like(x)


def _timed(model):
    sets = [[torch.randn(16, dtype=torch.float32)] for _ in range(3)]
    last: list = []
    call = keeping_last(model, sets, last)
    for _ in range(7):
        call()
    return timed_output_finding(_Workload(), object(), _Double(), sets, last)


def test_an_honest_program_passes_and_a_cheap_timed_path_fails():
    assert _timed(_Double()) is None
    finding = _timed(_DoubleUnlessTimed())
    assert finding is not None and finding.code == "mismatch"
