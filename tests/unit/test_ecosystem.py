"""The ecosystem catalogue (klineage.suites.ecosystem): every entry well-formed and inside the expert prefixes, the
written pair parses and loads, its reference computes on its tiny case, and the command's bad input is one line.
Runs without FlagGems and flash-linear-attention: only the import checks of installed packages need them."""

import ast
import importlib.util
import json
from collections import Counter

import pytest
import torch
from click.testing import CliRunner

from klineage.cli import main
from klineage.gates.candidate import installed_roots
from klineage.isolation import site_dirs
from klineage.program import Program, load_program, module_file, with_installed_modules
from klineage.suites.ecosystem import (
    ECOSYSTEM,
    EXPERT_MODULE_PREFIXES,
    PYPI_NAMES,
    WILD_MODULE_PREFIXES,
    EcosystemExpert,
    is_expert_module,
    select,
    write_expert,
)
from klineage.workload import import_file, load_workload, make_case_inputs

EXPERTS = list(ECOSYSTEM.values())
NAMES = [e.name for e in EXPERTS]


def test_catalogue_size_and_spread():
    by_package = Counter(e.package for e in EXPERTS)
    assert len(EXPERTS) >= 20
    assert set(by_package) == set(PYPI_NAMES) and min(by_package.values()) >= 3, by_package


def test_prefixes_are_disjoint_from_the_wild_suite():
    assert not any(p.startswith(w) or w.startswith(p) for p in EXPERT_MODULE_PREFIXES for w in WILD_MODULE_PREFIXES)
    assert is_expert_module("liger_kernel.ops.geglu") and is_expert_module("flag_gems.fused.reglu")
    assert is_expert_module("fla.ops.utils.softmax")
    assert not is_expert_module("flag_gems.ops.softmax") and not is_expert_module("flag_gems.fused")
    assert not is_expert_module("liger_kernel.transformers.rms_norm") and not is_expert_module("flashy.x")


@pytest.mark.parametrize("expert", EXPERTS, ids=NAMES)
def test_entry_is_well_formed(expert: EcosystemExpert):
    assert expert.modules and all(is_expert_module(m) for m in expert.modules), expert.modules
    assert all(m.startswith(expert.package + ".") for m in expert.modules)
    assert set(expert.cases) == {"tiny", "bench"}
    tiny, bench = expert.cases["tiny"], expert.cases["bench"]
    assert tiny.keys() == bench.keys() and "dtype" in tiny
    sizes = [k for k in tiny if k != "dtype"]
    assert all(0 < tiny[k] <= bench[k] for k in sizes)
    assert all(bench[k] % m == 0 and tiny[k] % m == 0 for k, m in expert.multiple_of.items())
    # the bench case fills a GPU, the tiny one suits the interpreter
    assert 2**20 <= _elements(bench) and _elements(tiny) <= 2**12
    # the program imports what it calls from a module it mines (that copy is what the walk rewrites)
    (imported,) = [n for n in ast.walk(ast.parse(expert.imports)) if isinstance(n, ast.ImportFrom)]
    assert imported.module in expert.modules
    names = {n.id for n in ast.walk(ast.parse(expert.inputs)) if isinstance(n, ast.Name)}
    assert names <= {*sizes, "randn", "randint", "probs", "logprobs"}, names


def _elements(case: dict) -> int:
    n = 1
    for k, v in case.items():
        if k != "dtype":
            n *= v
    return n


@pytest.mark.parametrize("expert", EXPERTS, ids=NAMES)
def test_written_pair_loads_and_the_reference_computes(expert: EcosystemExpert, tmp_path):
    workload_path, program_path = write_expert(expert, tmp_path / expert.name)
    ast.parse(program_path.read_text())
    workload = load_workload(workload_path)
    assert workload.name == expert.name and workload.cases == expert.cases
    assert workload.host_ops == expert.host_ops and workload.check_cases("cpu") == ["tiny"]
    for key, allowed in workload.domain.items():  # the gate draws extra shapes from here: all must be valid
        if key in expert.multiple_of:
            assert all(v % expert.multiple_of[key] == 0 for v in allowed)
    module = import_file(workload_path, f"eco_{expert.name}")
    inputs = make_case_inputs(module, expert.cases["tiny"], seed=1)
    wide = [x.double() if x.is_floating_point() else x for x in inputs]
    out = module.Model()(*wide)
    outs = out if isinstance(out, tuple) else (out,)
    assert all(o.dtype == torch.float64 and torch.isfinite(o).all() for o in outs)


@pytest.mark.parametrize("expert", EXPERTS, ids=NAMES)
def test_installed_modules_resolve_without_importing(expert: EcosystemExpert, tmp_path):
    if importlib.util.find_spec(expert.package) is None:
        pytest.skip(f"{expert.package} is not installed")
    assert expert.installed()
    _, program_path = write_expert(expert, tmp_path)
    program = with_installed_modules(load_program(program_path), list(expert.modules))
    assert set(program.modules) == set(expert.modules)
    assert all("triton.jit" in source for source in program.modules.values())


def test_module_file_runs_no_package_init(tmp_path, monkeypatch):
    package = tmp_path / "site" / "explosive"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("raise AssertionError('Torch not compiled with CUDA enabled')\n")
    (package / "sub" / "__init__.py").write_text("raise AssertionError('no')\n")
    (package / "sub" / "kernels.py").write_text("X = 1\n")
    (tmp_path / "site" / "single.py").write_text("Y = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert module_file("explosive.sub.kernels") == package / "sub" / "kernels.py"
    assert module_file("explosive.sub") == package / "sub" / "__init__.py"
    assert module_file("single") == tmp_path / "site" / "single.py"
    assert module_file("explosive.missing") is None and module_file("no_such_top_level_pkg.x") is None
    program = with_installed_modules(Program(name="p", source="import torch\n"), ["explosive.sub.kernels"])
    assert program.modules == {"explosive.sub.kernels": "X = 1\n"}
    # the candidate may read where that package is installed (its other modules, its dependencies), though the
    # folder holds no dist-info: the one site-directory rule (isolation.site_dirs) names it for this program only
    assert str((tmp_path / "site").resolve()) in installed_roots(program)
    assert str(tmp_path / "site") not in site_dirs()


def test_select():
    assert [e.name for e in select(["fla_softmax", "liger_dyt", "fla_softmax"])] == ["fla_softmax", "liger_dyt"]
    assert select([]) == EXPERTS
    with pytest.raises(KeyError, match="unknown ecosystem expert nope"):
        select(["liger_dyt", "nope"])


def _run(*args):
    result = CliRunner().invoke(main, ["mine-ecosystem", *args])
    assert "Traceback" not in result.output
    return result


def test_command_bad_input_is_one_line():
    unknown = _run("--only", "liger_dyt,nope")
    assert unknown.exit_code == 2 and "unknown ecosystem expert nope" in unknown.stderr
    steps = _run("--max-steps", "0")
    assert steps.exit_code == 2 and "--max-steps 0" in steps.stderr
    walk = _run("--only", "liger_dyt", "--device", "cpu", "--walk-device", "cuda")
    assert walk.exit_code == 2 and "--walk-device cuda with --device cpu" in walk.stderr


def test_command_lists_the_catalogue():
    listed = _run("--list", "--json", "--only", "liger_dyt,gems_reglu")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["name"] for r in rows] == ["liger_dyt", "gems_reglu"]
    assert rows[0]["modules"] == ["liger_kernel.ops.dyt"]
    assert rows[0]["installed"] == (importlib.util.find_spec("liger_kernel") is not None)
