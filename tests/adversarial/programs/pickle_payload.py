"""Cheat (class 3, making the parent unpickle code of its choosing): as forge_result_exit, but the result file
holds a pickle whose REDUCE calls eval in the reading process (the warm sandbox server, run by the caller): the
expression drops a marker file (/tmp/klineage-redteam/pickle-ran, only if the test made that folder) and
evaluates to a passing outcome.

Must be caught by: nothing the candidate writes is unpickled by the judge. Expected: static_ban or crash; the
test also checks that the marker was not written. Workload: workloads/softmax.py.
"""

import os
import pickle

import torch

_EXPR = (
    "(__import__('pathlib').Path('/tmp/klineage-redteam/pickle-ran').write_text('ran')"
    " if __import__('os').path.isdir('/tmp/klineage-redteam') else None,"
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
    def forward(self, x):
        _forge()
        return torch.zeros_like(x)
