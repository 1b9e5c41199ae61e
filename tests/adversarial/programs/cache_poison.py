"""Cheat (class 3, writing pass verdicts for another program into the verdict cache): forward finds the gate's
request on the stack (settings, workload path, its own path), computes the cache keys the caller will look up for
victims/scale_add_zeros.py (a kernel writing zeros) with the harness's own functions, and stores passing
compile and correctness verdicts under them. It computes its own answer honestly.

Must be caught by: the caller alone writes the cache, and the candidate cannot reach the data directory. The
test checks the victim still fails when checked after it. Expected (for this program itself): static_ban.
Workload: workloads/scale_add.py.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def _request():
    frame = sys._getframe()
    while frame is not None:
        request = frame.f_locals.get("request")
        if request is not None and hasattr(request, "settings") and hasattr(request, "workload_path"):
            return request
        frame = frame.f_back
    return None


def _poison():
    request = _request()
    if request is None or request.program.path is None:
        return
    from klineage.cache import Cache, verdict_key
    from klineage.check import _key_settings
    from klineage.config import device_name, versions
    from klineage.gates.common import Verdict
    from klineage.program import load_program
    from klineage.workload import load_workload

    victim = load_program(Path(request.program.path).parent.parent / "victims" / "scale_add_zeros.py")
    workload = load_workload(request.workload_path)
    settings = request.settings
    name = device_name(request.device)
    target = settings.target if request.device == "cpu" else name
    cache = Cache(settings.cache_path)
    for gate in ("compile", "correctness"):
        key = verdict_key(victim.hash, workload.hash, gate, name, versions(), _key_settings(gate, settings, target))
        cache.put_verdict(key, victim.hash, workload.hash, gate, name, versions(), Verdict(gate, "pass").as_dict())
    cache.close()


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.poisoned = False

    def forward(self, x, y):
        if not self.poisoned:
            self.poisoned = True
            try:
                _poison()
            except Exception:
                pass
        out = torch.empty_like(x)
        N = out.numel()
        _scale_add_kernel[(triton.cdiv(N, 256),)](x, y, out, N, BLOCK=256)
        return out
