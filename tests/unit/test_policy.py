"""The static policy's rules, each with a refused snippet and an allowed neighbour, and the obfuscations a program
written to pass them would try: aliases, names built at run time, imports inside functions, star imports, routes
through torch and triton to banned modules, builtins, namespaces, class-registry walks, decorators, lambdas."""

import pytest

from klineage.policy import judge

PROGRAM = """\
import torch
import triton
import triton.language as tl
{head}

@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        {body}
        copy_kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)
        return y
"""


def rules(body: str = "pass", head: str = "") -> set[str]:
    source = PROGRAM.format(head=head, body=body)
    return {f.rule for f in judge([("program", source)], {"program"})}


def test_an_honest_program_passes():
    assert rules() == set()


REFUSED = [
    # imports outside the allow-list, at the top and inside a function
    ("", "import os", "import"),
    ("", "import numpy", "import"),
    ("", "import sys", "import"),
    ("", "import inspect", "import"),
    ("", "import gc", "import"),
    ("", "import ctypes", "import"),
    ("", "import subprocess", "import"),
    ("", "import threading", "import"),
    ("", "import multiprocessing", "import"),
    ("", "import socket", "import"),
    ("", "import pickle", "import"),
    ("", "import marshal", "import"),
    ("", "import shutil", "import"),
    ("", "import signal", "import"),
    ("", "import importlib", "import"),
    ("", "import builtins", "import"),
    ("", "from concurrent.futures import ThreadPoolExecutor", "import"),
    ("", "from torch import *", "import"),
    ("", "from typing import get_type_hints", "import"),
    ("", "from functools import partialmethod", "import"),
    ("", "from operator import attrgetter", "import"),
    ("import os as o", "pass", "import"),
    # dynamic code
    ("", "eval('1')", "dynamic_code"),
    ("", "exec('y = x')", "dynamic_code"),
    ("", "compile('1', 'f', 'eval')", "dynamic_code"),
    ("", "breakpoint()", "dynamic_code"),
    ("", "__import__('os')", "private_name"),
    # attribute access by computed name, namespaces
    ("", "getattr(torch, 'a' + 'dd')(x, x)", "computed_attribute"),
    ("", "g = getattr", "computed_attribute"),
    ("", "setattr(self, 'k', 1)", "computed_attribute"),
    ("", "delattr(self, 'k')", "computed_attribute"),
    ("", "getattr(x, '_base')", "computed_attribute"),
    ("", "vars(self)", "computed_attribute"),
    ("", "globals()", "computed_attribute"),
    ("", "locals()", "computed_attribute"),
    ("", "dir(x)", "computed_attribute"),
    ("", "type(x)", "computed_attribute"),
    ("", "open('/etc/passwd')", "builtin"),
    ("", "'{0.__class__}'.format(x)", "format"),
    # dunders and private names
    ("", "d = self.__dict__", "private_attribute"),
    ("", "c = x.__class__", "private_attribute"),
    ("", "s = torch.nn.Module.__subclasses__()", "private_attribute"),
    ("", "b = ().__class__.__bases__", "private_attribute"),
    ("", "c = copy_kernel.fn.__globals__", "private_attribute"),
    ("", "f = (lambda: 0).__code__", "private_attribute"),
    ("", "t = x._base", "private_attribute"),
    ("", "m = __builtins__", "private_name"),
    ("", "f = (i for i in ()).gi_frame.f_back", "frame_attribute"),
    ("", "copy_kernel.add_pre_run_hook(print)", "launch_hook"),
    ("", "copy_kernel.pre_run_hooks.append(print)", "launch_hook"),
    # routes through allowed modules to banned ones
    ("", "torch.os.system('true')", "module_reach"),
    ("", "torch.ops.aten.add(x, x)", "module_reach"),
    ("", "torch._C._set_grad_enabled(False)", "private_attribute"),
    ("", "torch.utils.cpp_extension.load_inline", "module_reach"),
    ("", "torch.compile(torch.add)", "module_reach"),
    ("", "torch.from_numpy(x)", "module_reach"),
    ("", "triton.runtime.driver", "module_reach"),
    ("", "torch.onnx.export(self, (x,), 'f.onnx')", "module_reach"),
    ("", "torch.nn.parallel.parallel_apply", "module_reach"),
    ("", "from itertools import starmap", "import"),
    ("", "torch.set_grad_enabled(False)", "module_reach"),
    ("", "m = torch", "module_value"),
    ("", "h = [torch][0].nn", "module_value"),
    # monkeypatching, subclasses and hooks
    ("", "torch.equal = lambda a, b: True", "monkeypatch"),
    ("", "copy_kernel.run = None", "monkeypatch"),
    ("", "x.data = y", "monkeypatch"),
    ("class T(torch.Tensor):\n    pass", "pass", "class_base"),
    ("class M(type):\n    pass\nclass K(metaclass=M):\n    pass", "pass", "class_base"),
    ("class K:\n    def __getattr__(self, name):\n        return name", "pass", "dunder_def"),
    ("class K:\n    def __torch_function__(self, *a):\n        return a", "pass", "dunder_def"),
    ("def deco(f):\n    return f\n@(lambda f: deco(f))\ndef g():\n    pass", "pass", "decorator"),
    # host transfers and scalar reads in forward
    ("", "v = x.tolist()", "host_transfer"),
    ("", "v = x.item()", "host_transfer"),
    ("", "v = x.numpy()", "host_transfer"),
    ("", "v = x.cpu()", "host_transfer"),
    ("", "v = x.to('cpu')", "host_transfer"),
    ("", "v = x.to(device='cpu')", "host_transfer"),
    ("", "v = x.to(torch.device('cpu'))", "host_transfer"),
    ("", "v = float(x[0])", "scalar_extraction"),
    ("", "v = int(x.sum())", "scalar_extraction"),
    ("", "v = f'{x[0]}'", "scalar_extraction"),
    ("", "v = [1, 2][x[0]]", "scalar_extraction"),
    ("", "v = 1 if x.any() else 0", "scalar_extraction"),
    ("", "v = [t for t in x]\n        w = float(v[0])", "scalar_extraction"),
    ("def helper(t):\n    return t.tolist()", "helper(x)", "host_transfer"),
]


@pytest.mark.parametrize("head, body, rule", REFUSED, ids=[f"{r}:{h or b}"[:60] for h, b, r in REFUSED])
def test_refused(head, body, rule):
    assert rule in rules(body, head)


ALLOWED = [
    ("import math", "s = math.sqrt(n)"),
    ("from typing import Optional", "v: Optional[int] = None"),
    ("import functools\n@functools.lru_cache\ndef blocks(n):\n    return triton.next_power_of_2(n)", "b = blocks(n)"),
    ("from dataclasses import dataclass\n@dataclass\nclass Cfg:\n    block: int = 128", "c = Cfg()"),
    ("from __future__ import annotations", "pass"),
    ("import itertools", "c = list(itertools.product([64, 128], [4, 8]))"),
    ("def f(a: int, b: float = 1.0) -> float:\n    return b", "ok = isinstance(n, (int, float))"),
    ("", "s = tuple(map(int, x.shape))\n        t: int = 3\n        u = sorted([3, 1], key=int)"),
    ("", "s = getattr(x, 'shape')"),
    ("", "ok = hasattr(x, 'stride')"),
    ("", "m = int(x.shape[0])"),
    ("", "k = float(n)"),
    ("", "z = x.to(x.device)"),
    ("", "st = x.stride(0)"),
    ("", "self._cache = {}\n        c = self._cache"),
    ("", "name = copy_kernel.__name__"),
    ("", "assert x.is_contiguous()"),
    ("", "if n > 1024:\n            n = n"),
    ("", "z = torch.empty((n,), dtype=torch.float32, device=x.device)"),
    ("", "p = torch.cuda.is_available()"),
    ("", "on_host = x.device.type == 'cpu'"),
    ("from triton.tools.tensor_descriptor import TensorDescriptor", "pass"),
]


@pytest.mark.parametrize("head, body", ALLOWED, ids=[(h or b)[:60] for h, b in ALLOWED])
def test_allowed_neighbour(head, body):
    assert rules(body, head) == set()


def test_a_finding_names_the_rule_and_the_line():
    source = PROGRAM.format(head="import os", body="pass")
    (found,) = judge([("program", source)], {"program"})
    assert (found.rule, found.module, found.line) == ("import", "program", 4)
    assert str(found).startswith("program line 4: import: import os")


def test_a_name_bound_by_a_refused_import_is_refused_where_it_is_used():
    source = PROGRAM.format(head="import os", body="os.system('true')")
    lines = {f.line for f in judge([("program", source)], {"program"}) if f.rule == "import"}
    assert lines == {4, source.splitlines().index("        os.system('true')") + 1}


def test_a_kernel_body_is_only_kernel_code():
    source = PROGRAM.format(head="", body="pass").replace(
        "    mask = offs < n\n", "    mask = offs < n\n    torch.sum(x_ptr)\n"
    )
    assert "kernel_body" in {f.rule for f in judge([("program", source)], {"program"})}


def test_a_launch_callback_does_not_compute():
    body = "grid = lambda meta: (meta['x_ptr'].sum(),)\n        copy_kernel[grid](x, y, n, BLOCK=128)"
    assert "launch_callback" in rules(body)


def test_the_programs_own_module_is_followed_and_judged():
    """A directory program: program.py imports a helper module it ships, and that module is judged too."""
    main = PROGRAM.format(head="from fastkern.ops import scale", body="y = scale(x)")
    helper = "import torch\n\n\ndef scale(t):\n    return t.tolist()\n"
    found = judge([("program", main), ("fastkern.ops", helper)], {"program", "fastkern.ops"})
    assert {(f.module, f.rule) for f in found} == {("fastkern.ops", "host_transfer")}


def test_an_alias_in_the_own_module_is_not_a_definition():
    main = PROGRAM.format(head="from fastkern.ops import run", body="pass")
    helper = "import torch\n\nrun = torch.add\nBLOCK = 128\n"
    found = judge([("program", main), ("fastkern.ops", helper)], {"program"})
    assert [(f.rule, "alias" in f.detail) for f in found] == [("import", True)]
    main = PROGRAM.format(head="from fastkern.ops import BLOCK", body="pass")
    assert judge([("program", main), ("fastkern.ops", helper)], {"program"}) == []


def test_a_name_not_defined_in_the_own_module_is_refused():
    main = PROGRAM.format(head="from fastkern.ops import os", body="pass")
    helper = "import os\n"
    found = judge([("program", main), ("fastkern.ops", helper)], {"program"})
    assert "import" in {f.rule for f in found if f.module == "program"}


def test_installed_kernel_package_names_are_reached_by_definition_only():
    """A public function of an installed kernel package is callable; its module's imports are not handed over."""
    ok = PROGRAM.format(head="from liger_kernel.ops.rms_norm import LigerRMSNormFunction", body="pass")
    assert judge([("program", ok)], {"program"}) == []
    bad = PROGRAM.format(head="from liger_kernel.ops.utils import importlib", body="pass")
    assert "import" in {f.rule for f in judge([("program", bad)], {"program"})}
    outside = PROGRAM.format(head="from liger_kernel.transformers import apply_liger_kernel_to_llama", body="pass")
    assert "import" in {f.rule for f in judge([("program", outside)], {"program"})}


def test_a_module_that_does_not_parse_is_a_finding():
    (found,) = judge([("program", "def (:\n")], {"program"})
    assert found.rule == "syntax"


def test_only_judged_modules_are_refused():
    source = PROGRAM.format(head="import os", body="pass")
    assert judge([("program", source)], set()) == []


def test_a_kernel_does_not_call_a_host_function_of_the_programs_own_module():
    kernel = "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)\n"
    main = PROGRAM.format(head="from fastkern.ops import helper, tile", body="pass")
    helper = (
        "import triton\nimport triton.language as tl\n\n\ndef helper(p):\n    return p\n\n\n"
        "@triton.jit\ndef tile(v):\n    return v\n"
    )
    calls_tile = main.replace(kernel, kernel + "    tile(offs)\n")
    assert judge([("program", calls_tile), ("fastkern.ops", helper)], {"program", "fastkern.ops"}) == []
    calls_helper = main.replace(kernel, kernel + "    helper(x_ptr)\n")
    found = judge([("program", calls_helper), ("fastkern.ops", helper)], {"program", "fastkern.ops"})
    assert {f.rule for f in found} == {"kernel_body"}


@pytest.mark.parametrize(
    "head, body",
    [
        ("def impl(self, x):\n    return x.tolist()", "pass"),  # bound as forward below, never called by name
        ("def deco(f):\n    def wrap(self, x):\n        return float(x[0])\n    return wrap", "pass"),
    ],
)
def test_host_rules_hold_in_every_function_not_only_what_forward_names(head, body):
    source = PROGRAM.format(head=head, body=body).replace(
        "    def forward(self, x):", "    forward2 = None\n\n    def forward(self, x):"
    )
    assert {"host_transfer", "scalar_extraction"} & {f.rule for f in judge([("program", source)], {"program"})}


def test_an_error_message_may_format_an_argument():
    assert rules("if n < 0:\n            raise ValueError(f'bad {x.shape} {n!r}')") == set()


OBFUSCATED = [
    ("", "f = x.tolist\n        v = f()", "host_transfer"),
    ("", "v = getattr(x, 'tolist')()", "computed_attribute"),
    ("", "v = getattr(torch, 'ops')", "computed_attribute"),
    ("", "v = getattr(torch.nn.functional, 'softmax')", "computed_attribute"),
    ("", "v = list(map(float, x))", "scalar_extraction"),
    ("", "y.apply_(lambda v: v * 2)", "host_transfer"),
    ("T = torch.Tensor", "T.equal = None", "monkeypatch"),
    ("F = torch.nn.functional\nG = F", "G.softmax = None", "monkeypatch"),
    ("", "del torch.equal", "monkeypatch"),
    ("", "f = float\n        v = f(x[0])", "scalar_alias"),
    ("", "fs = [int]\n        v = fs[0](x[0])", "scalar_alias"),
    ("", "v = (lambda g: g(x[0]))(float)", "scalar_alias"),
]


@pytest.mark.parametrize("head, body, rule", OBFUSCATED, ids=[f"{r}:{h or b}"[:60] for h, b, r in OBFUSCATED])
def test_obfuscation_refused(head, body, rule):
    assert rule in rules(body, head)


def test_hasattr_on_an_imported_object_and_getattr_on_a_value_stay_allowed():
    assert rules("ok = hasattr(triton.Config, 'pre_hook')\n        s = getattr(x, 'shape', None)") == set()
    assert rules("ok = hasattr(tl, 'make_tensor_descriptor')") == {"module_value"}  # a module is never a value


def test_a_refused_submodule_import_leaves_the_allowed_root_usable():
    source = PROGRAM.format(head="import torch.distributed.tensor", body="pass")
    assert [(f.rule, f.line) for f in judge([("program", source)], {"program"})] == [("import", 4)]


def test_source_that_crashes_the_analysis_is_refused_not_raised(monkeypatch):
    import klineage.policy

    def broken(modules):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(klineage.policy, "flow_findings", broken)
    source = PROGRAM.format(head="", body="pass")
    (found,) = judge([("program", source), ("kern.ops", "X = 1\n")], {"program"})
    assert (found.rule, found.module) == ("policy_error", "program") and "RecursionError" in found.detail
