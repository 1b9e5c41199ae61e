"""Cheat (class 3, patching the harness's own functions): at import, the program reaches klineage.guards through
sys.modules (the judge's code shares its process) and replaces the dispatch guard with a do-nothing context, and
the launch, guard-region, replay and static checks with functions that find nothing. forward is plain
torch.softmax.

Must be caught by: no judge code in the candidate's process (then the patch is a no-op and the ban holds) or the
static policy (sys). Expected: static_ban, torch_compute or no_kernel_launch. Workload: workloads/softmax.py.
"""

import sys

import torch


class _Quiet:
    def __init__(self):
        self.allocations, self.banned, self.derived = [], [], set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_guards = sys.modules.get("klineage.guards")
if _guards is not None:
    _guards._make_forward_guard = lambda *a, **k: _Quiet()
    _guards.launch_findings = lambda *a, **k: None
    _guards.check_guards = lambda *a, **k: None
    _guards.static_findings = lambda *a, **k: []
_gate = sys.modules.get("klineage.gates.correctness")
if _gate is not None:
    _gate._replay_finding = lambda *a, **k: None


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
