"""The quantization suite (`wild-quant`): its catalogue is well formed, its entries and LEFT_OUT are disjoint, and
every entry obeys the wild suite's disjointness rule. The parts that read the installed packages (the wrapper each
entry calls exists, and no launch of it goes through a tuned `@triton.autotune`) are skipped where torchao or
bitsandbytes is not installed (CI installs neither)."""

import ast

import pytest

from klineage.bench.suites import wild_catalogue
from klineage.suites import wild_quant
from klineage.suites.wild import installed, module_source, rule_violations, under_expert_prefix
from tests.wild_catalogue import assert_wellformed

PACKAGES = {"bitsandbytes": "bitsandbytes", "torchao": "torchao"}


def test_the_catalogue_is_wellformed_with_unique_names():
    kernels = wild_quant.catalogue()
    assert len(kernels) >= 20 and wild_catalogue("wild-quant") == kernels
    assert len({k.name for k in kernels}) == len(kernels)
    for k in kernels:
        assert k.name.startswith({"bitsandbytes": "bnb_", "torchao": "ao_"}[k.package]), k.name
        assert k.distribution == PACKAGES[k.package] and k.module.startswith(k.package + "."), k.name
        # the rule's bench size: a main operand of 2^24 elements (a matmul 4096^3)
        assert_wellformed(k, 1 << 24)


def test_left_out_names_a_reason_for_each_and_no_entry():
    names = {k.name for k in wild_quant.catalogue()}
    assert wild_quant.LEFT_OUT and not names & set(wild_quant.LEFT_OUT)
    assert all(isinstance(why, str) and why for why in wild_quant.LEFT_OUT.values())


def test_every_entry_obeys_the_disjointness_rule():
    for k in wild_quant.catalogue():
        assert not under_expert_prefix(k.module), k.name
        assert rule_violations(k) == [], k.name  # with the packages installed, their imports are read from the files


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_entry_calls_an_installed_wrapper_that_launches_untuned(package):
    if not installed(package):
        pytest.skip(f"{package} is not installed")
    for k in (k for k in wild_quant.catalogue() if k.package == package):
        source = module_source(k.module)
        assert source is not None, k.name
        tree = ast.parse(source)
        functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        # the wrapper as defined where Triton is there (a module may define a stub in its `else:`)
        wrappers = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == k.function]
        assert wrappers, k.name
        # the kernels the wrapper launches (`kernel[grid](...)`, `wrap_triton(kernel)[grid](...)`): none carries a
        # `@triton.autotune` of two or more configs in its module
        launched = set()
        for call in (c for w in wrappers for c in ast.walk(w)):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript):
                target = call.func.value
                if isinstance(target, ast.Call) and target.args:
                    target = target.args[0]
                launched.add(ast.unparse(target).split(".")[-1])
        assert launched, k.name
        for name in launched & set(functions):
            for deco in functions[name].decorator_list:
                if "autotune" in ast.unparse(deco):
                    configs = next((kw.value for kw in deco.keywords if kw.arg == "configs"), None)
                    if isinstance(configs, ast.Name):  # a list named in the module: its last (CUDA) assignment
                        configs = [
                            n.value
                            for n in ast.walk(tree)
                            if isinstance(n, ast.Assign)
                            and any(isinstance(x, ast.Name) and x.id == configs.id for x in n.targets)
                        ][-1]
                    assert isinstance(configs, ast.List) and len(configs.elts) < 2, f"{k.name}: {name} is tuned"
