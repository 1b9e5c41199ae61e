"""Which program functions ran (gates.candidate._calls_into, the `functions_run` of a check) under Triton's
interpreter: the kernel, a device function only a later program calls, host functions before and after a grid.
Only a grid's first program runs under the profile hook (it made an interpreted grid x3.7 slower), so what later
programs call must still be noted."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.interpreter

PROGRAM = """
import triton
import triton.language as tl


@triton.jit
def first_only(x):
    return x + 1


@triton.jit
def later_only(x):
    return x + 2


@triton.jit
def kernel(out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.zeros((BLOCK,), tl.float32)
    if pid == 0:
        v = first_only(v)
    else:
        v = later_only(v)
    tl.store(out_ptr + offs, v)


def after(out):
    return out * 1


def forward(out):
    kernel[(4,)](out, BLOCK=16)
    return after(out)
"""

SCRIPT = """
import json, sys
from klineage.interp import patch_interpreter
patch_interpreter()
import torch
from klineage.gates.candidate import _calls_into
root = sys.argv[1]
sys.path.insert(0, root)
import prog
found = set()
with _calls_into(found, root):
    out = prog.forward(torch.zeros(64))
print(json.dumps({"found": sorted(found), "hook_after": sys.getprofile() is not None,
                  "values": out.tolist()}))
"""


def test_functions_that_later_programs_call_are_noted(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"forward", "kernel", "first_only", "later_only", "after"} <= set(answer["found"]), answer["found"]
    assert not answer["hook_after"]  # the hook the context found (none) is back
    assert answer["values"] == [1.0] * 16 + [2.0] * 48
