"""Cheat (class 3, forging the judge's outcome whichever way it travels): a plain pickle of ("ok", a passing
Verdict), with no code in it, so an allow-list unpickler that admits the package's records still reads it. Where
the child's stdin is /dev/null (a server that closes every inherited descriptor and gives its child a result pipe)
it goes, length-prefixed, into the one pipe it may write, the result pipe; elsewhere into the jobN.result file
beside its log. Then it exits before the judge writes anything.

Must be caught by: the candidate in a process of its own, holding only its pipes to the judge, which decides the
verdict itself. Expected: static_ban or crash. Workload: workloads/softmax.py.
"""

import fcntl
import os
import pickle
import struct

import torch


def _outcome():
    from klineage.gates.common import Verdict

    return pickle.dumps(("ok", Verdict("correctness", "pass", metrics={"trials": 8})))


def _forge():
    try:
        stdin, log = os.readlink("/proc/self/fd/0"), os.readlink("/proc/self/fd/1")
    except OSError:
        return
    data = _outcome()
    if stdin != "/dev/null":  # the server's pipes are still here: the outcome is a file beside the log
        if log.endswith(".log"):
            with open(log[: -len(".log")] + ".result", "wb") as f:
                f.write(data)
            os._exit(0)
        return
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_WRONLY:
                os.write(fd, struct.pack("<Q", len(data)) + data)
                os._exit(0)
        except OSError:
            continue


class ModelNew(torch.nn.Module):
    def forward(self, x):
        _forge()
        return torch.zeros_like(x)
