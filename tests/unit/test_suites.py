"""The held-out suite's shape: exactly 22 instances, each a workload with tiny and bench cases, a roofline, a docstring
that says what is computed, and a naive program; names distinct from each other and from the bundled examples."""

import ast

import pytest

from klineage.suites import SUITES, suite_instances
from klineage.workload import import_file, load_workload
from tests.conftest import EXAMPLES

PAIRS = suite_instances("heldout")
IDS = [w.parent.name for w, _ in PAIRS]


def test_heldout_has_22_distinct_instances():
    assert len(PAIRS) == 22
    names = [w.parent.name for w, _ in PAIRS]
    assert len(set(names)) == 22
    assert not set(names) & {p.name for p in EXAMPLES.iterdir() if p.is_dir()}, "a bundled example reused as-is"
    assert all(w.parent == p.parent and w.name == "workload.py" and p.name == "naive.py" for w, p in PAIRS)


def test_suite_lookup_by_name_or_folder_and_unknown_names():
    assert suite_instances(str(SUITES["heldout"])) == PAIRS
    with pytest.raises(KeyError):
        suite_instances("no-such-suite")


def test_readme_lists_every_instance():
    readme = (SUITES["heldout"] / "README.md").read_text()
    for name in IDS:
        assert f"`{name}`" in readme, f"{name} missing from heldout/README.md"


@pytest.mark.parametrize("workload, program", PAIRS, ids=IDS)
def test_instance_is_complete(workload, program):
    wl = load_workload(workload)
    assert wl.name == workload.parent.name
    assert {"tiny", "bench"} <= set(wl.cases)
    assert wl.has_extensions and wl.has_roofline
    assert wl.check_cases("cpu") and "bench" not in wl.check_cases("cpu")
    assert wl.domain.get("dtype") and wl.domain.get("layout")
    for case in wl.cases.values():
        assert case["dtype"] in wl.domain["dtype"]
    module = import_file(workload, "suite_workload_under_test")
    for name, case in wl.cases.items():
        flops, nbytes = float(module.flops(case)), float(module.bytes_moved(case))
        assert flops >= 0 and nbytes > 0, name
    bench = wl.cases["bench"]
    # bench fills an H200: at least 100 MiB moved or 50 GFLOP
    assert module.bytes_moved(bench) >= 100 * 2**20 or module.flops(bench) >= 50e9
    doc = ast.get_docstring(ast.parse(workload.read_text()))
    assert doc and len(doc) > 200, "the workload's docstring says what is computed and its trap"
    naive = program.read_text()
    assert "class ModelNew" in naive and "@triton.jit" in naive
    assert "triton.autotune" not in naive and ast.get_docstring(ast.parse(naive))
