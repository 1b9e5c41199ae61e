"""The wild suite (issue 31, item 7): its catalogue is well formed and obeys the disjointness rule, it builds
instances from an installed package (a tiny one written here; FlagGems is not installed in CI), and the per-suite
report (shares that load, start correct and improve; rejections classified; the worst reported / re-timed ratio) is
computed from a bench result."""

import os
import sys

import pytest

from klineage.bench.metrics import suite_shares
from klineage.bench.rejections import KERNEL_BUG, OUR_LIMIT, UNCLASSIFIED, classify
from klineage.bench.report import markdown
from klineage.bench.suites import wild_instances
from klineage.config import Settings
from klineage.suites import wild
from klineage.suites.wild import EXPERT_MODULE_PREFIXES, WildKernel, rule_violations, under_expert_prefix
from tests.wild_catalogue import assert_wellformed

TINY = """import torch
import triton
import triton.language as tl


@triton.jit
def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    y = torch.empty_like(x)
    n = x.numel()
    double_kernel[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
    return y
"""


def tiny_kernel(name="tiny_double", module="tinywild.ops", package="tinywild") -> WildKernel:
    return WildKernel(
        name,
        package,
        package,
        module,
        "double",
        "x",
        "return double(x)",
        "return x * 2",
        {"M": 4096, "N": 8192},
        "[torch.randn(M, N)]",
    )


@pytest.fixture
def tinywild(tmp_path, monkeypatch):
    """An installed package of one Triton kernel (and one module that takes a kernel from an expert module)."""
    root = tmp_path / "site"
    (root / "tinywild").mkdir(parents=True)
    (root / "tinywild" / "__init__.py").write_text("")
    (root / "tinywild" / "ops.py").write_text(TINY)
    (root / "tinywild" / "helper.py").write_text("from liger_kernel.ops.rms_norm import _rms_norm_forward_kernel\n")
    (root / "tinywild" / "borrowed.py").write_text("from tinywild.helper import _rms_norm_forward_kernel\n")
    monkeypatch.syspath_prepend(str(root))
    # the judge's processes too: a bench starts its own sandbox server, which imports the reference from there
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p))
    yield root
    for name in [m for m in sys.modules if m.startswith("tinywild")]:
        del sys.modules[name]


def test_the_catalogue_has_forty_wellformed_kernels_with_unique_names():
    kernels = wild.catalogue()
    assert len(kernels) >= 40
    assert len({k.name for k in kernels}) == len(kernels)
    for k in kernels:
        assert_wellformed(k, 4096)


def test_every_catalogue_entry_obeys_the_disjointness_rule():
    for k in wild.catalogue():
        assert not under_expert_prefix(k.module), k.name
        assert rule_violations(k) == [], k.name  # with FlagGems installed, its imports read from the files too


def test_the_rule_refuses_an_expert_module_and_a_kernel_taken_from_one(tinywild):
    from klineage.suites import ecosystem

    assert EXPERT_MODULE_PREFIXES is ecosystem.EXPERT_MODULE_PREFIXES  # one rule for the experts and the wild suite
    assert under_expert_prefix("flag_gems.fused.cross_entropy_loss") and under_expert_prefix("fla.ops.utils")
    assert not under_expert_prefix("flag_gems.ops.softmax") and not under_expert_prefix("flashy")
    assert rule_violations(tiny_kernel(module="liger_kernel.ops.rms_norm", package="liger_kernel"))
    assert rule_violations(tiny_kernel()) == []
    found = rule_violations(tiny_kernel(module="tinywild.borrowed"))  # through a module of its own package
    assert found and found[0] == "tinywild.borrowed imports liger_kernel.ops.rms_norm"
    offered, left = wild.chosen((tiny_kernel(), tiny_kernel("borrowed", "tinywild.borrowed")))
    assert [k.name for k in offered] == ["tiny_double"] and "disjointness" in left["borrowed"]


def test_the_suite_builds_instances_from_an_installed_package(tinywild, data_dir):
    settings = Settings.from_env(data_dir=data_dir)
    missing = tiny_kernel("absent", "nowhere_pkg.ops", "nowhere_pkg")
    instances, left = wild_instances(settings, (tiny_kernel(), missing))
    assert left == {"absent": "not installed: nowhere_pkg"}
    (inst,) = instances
    assert inst.name == "tiny_double" and inst.expert is None
    assert inst.start.modules == {"tinywild.ops": TINY}  # a rewritable copy travels with the start
    assert "from tinywild.ops import double" in inst.start.source
    text = inst.workload.read_text()
    assert "NATIVE_REFERENCE = True" in text and "tiny_double.py" in text  # the program is its own reference
    assert inst.origin["pytorch"].endswith("pytorch.py") and inst.origin["module"] == "tinywild.ops"


def test_a_rejection_is_a_kernel_bug_only_when_pytorch_disagrees_with_its_values():
    why = "the starting program p fails its correctness gate (nondeterministic: two runs differ); optimize starts"
    bug = classify("start", why, {"status": "fail", "code": "mismatch"})
    assert (bug["class"], bug["gate"], bug["code"]) == (KERNEL_BUG, "correctness", "nondeterministic")
    assert classify("start", why, {"status": "pass", "code": ""})["class"] == OUR_LIMIT  # ours refused it
    assert classify("start", why, {"status": "fail", "code": "timeout"})["class"] == OUR_LIMIT
    assert classify("start", why, {"status": "fail", "code": "output_not_from_kernel"})["class"] == OUR_LIMIT
    load = classify("load", "the workload does not load: ImportError", {"status": "fail", "code": "import_error"})
    assert (load["class"], load["code"]) == (OUR_LIMIT, "import_error")
    assert classify("start", why, None)["class"] == UNCLASSIFIED


def _row(instance, method, speedup, retimed, escapes=()):
    return {
        "instance": instance,
        "method": method,
        "speedup": speedup,
        "expert_fraction": None,
        "roofline_fraction": None,
        "vs_torch_compile": None,
        "evaluations": 4,
        "evaluations_to_95": 2 if speedup and speedup > 1 else None,
        "failed_share": 0.0,
        "kept": 1,
        "refusals": 0,
        "escapes": list(escapes),
        "seconds": 1.0,
        "stop": "budget",
        "best_hash": "h",
        "retimed_speedup": retimed,
    }


def _result():
    names = ["a", "b", "c", "d", "e"]
    return {
        "stamp": {
            "methods": ["klineage", "blind"],
            "instances": names,
            "suite": names,
            "device": "NVIDIA H200",
            "commit": "abc",
            "budget": 4,
            "date": "2026-12-03",
            "seconds": 1.0,
            "versions": {},
            "timed": True,
        },
        "rows": [
            _row("a", "klineage", 2.0, 2.02),
            _row("b", "klineage", 1.5, 1.4),  # reported 7% over its re-time: the worst case
            _row("c", "klineage", 1.0, 1.0),
            _row("a", "blind", 1.0, 1.0),
            _row("b", "blind", 3.0, 3.0, escapes=[{"check": "hidden seeds", "code": "mismatch", "reason": ""}]),
            _row("c", "blind", 1.2, 1.2),
        ],
        "summary": {},
        "references": {},
        "trajectories": {},
        "skipped": {"d": "the workload does not load: x", "e": "the starting program e fails its correctness gate"},
        "costs": {},
        "rejections": {
            "d": classify("load", "the workload does not load: x", {"status": "fail", "code": "import_error"}),
            "e": classify(
                "start",
                "the starting program e fails its correctness gate (mismatch: off)",
                {"status": "fail", "code": "mismatch"},
            ),
        },
        "checks": {"a": {"status": "pass", "code": ""}, "d": {"status": "fail", "code": "import_error"}},
        "not_offered": {"f": "not installed: tinywild"},
    }


def test_suite_shares_from_a_bench_result():
    (shares,) = suite_shares(_result()).values()
    assert (shares["offered"], shares["loaded"], shares["started"], shares["not_offered"]) == (5, 4, 3, 1)
    assert shares["load_share"] == pytest.approx(0.8) and shares["start_share"] == pytest.approx(0.6)
    assert shares["rejections"] == {OUR_LIMIT: 1, KERNEL_BUG: 1}
    assert (shares["checked_against_pytorch"], shares["pass_against_pytorch"]) == (2, 1)
    ours, blind = shares["methods"]["klineage"], shares["methods"]["blind"]
    assert ours["improved_share"] == pytest.approx(2 / 3)
    assert ours["geomean_speedup"] == pytest.approx((2.0 * 1.5 * 1.0) ** (1 / 3))
    assert ours["geomean_retimed_speedup"] == pytest.approx((2.02 * 1.4 * 1.0) ** (1 / 3))
    assert ours["worst_reported_over_retimed"] == {"instance": "b", "ratio": pytest.approx(1.5 / 1.4)}
    assert ours["mean_evaluations_to_95"] == 2
    # an escape counts, and is credited x1.0 in both means
    assert blind["escapes"] == 1 and blind["geomean_speedup"] == pytest.approx(1.2 ** (1 / 3))
    assert blind["geomean_retimed_speedup"] == pytest.approx(1.2 ** (1 / 3))


def test_the_report_shows_the_suite_shares_and_each_rejection():
    result = _result()
    result["summary"] = {m: {} for m in result["stamp"]["methods"]}
    text = "\n".join(_suite_lines(result))
    assert "5 offered (1 more not offered), 4 load (80%), 3 start correct (60%)" in text
    assert "| e | start | correctness | mismatch | kernel bug | fail mismatch |" in text
    assert "1.071 (b)" in text
    assert "not offered: f: not installed: tinywild" in text


def test_a_cut_run_s_unfinished_instances_are_not_counted_as_failed_starts():
    """A run cut before it finished some instances: they neither started correct nor were rejected."""
    result = _result()
    result["stamp"]["suite"] = [*result["stamp"]["suite"], "g", "h"]
    result["stamp"]["unfinished"] = ["g", "h"]
    result["summary"] = {m: {} for m in result["stamp"]["methods"]}
    (shares,) = suite_shares(result).values()
    assert (shares["offered"], shares["started"], shares["unfinished"]) == (7, 3, 2)
    assert shares["start_share"] == pytest.approx(0.6)
    assert "3 start correct (60% of the 5 finished, 2 not)" in "\n".join(_suite_lines(result))


def _suite_lines(result):
    from klineage.bench.report import _suite_shares

    return _suite_shares(result)


def test_markdown_of_an_ordinary_run_has_no_suite_section():
    result = _result()
    for key in ("rejections", "checks"):
        result[key] = {}
    for row in result["rows"]:
        row["retimed_speedup"] = None
    assert _suite_lines(result) == []
    assert callable(markdown)
