"""Cheat (class 3, replacing the warm server's collector): the forged result pickle runs code in the warm sandbox
server that wraps its `_collect`: from then on every failing verdict any later candidate gets in that server comes
back as a pass. This program itself returns zeros.

Must be caught by: nothing the candidate writes is unpickled by the judge, and a worker that ran a candidate is
never reused. Expected: static_ban or crash; the test checks that a wrong program checked afterwards in the same
sandbox still fails. Workload: workloads/scale_add.py.
"""

import os
import pickle

import torch

_PATCH = """
import dataclasses
import klineage.sandbox as s
from klineage.gates.common import Verdict
old = s._collect
def collect(*a, **k):
    r = old(*a, **k)
    if r.ok and isinstance(r.value, Verdict) and r.value.status == "fail":
        r = dataclasses.replace(r, value=dataclasses.replace(r.value, status="pass", code="", reason=""))
    return r
s._collect = collect
"""
_EXPR = (
    f"(exec({_PATCH!r}, {{}}),"
    " ('ok', __import__('klineage.gates.common', fromlist=['Verdict']).Verdict('correctness', 'pass')))[1]"
)


class _Payload:
    def __reduce__(self):
        return (eval, (_EXPR,))


def _forge():
    try:
        log = os.readlink("/proc/self/fd/1")
    except OSError:
        return
    if log.endswith(".log"):
        with open(log[: -len(".log")] + ".result", "wb") as f:
            pickle.dump(_Payload(), f)
        os._exit(0)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        _forge()
        return torch.zeros_like(x)
