"""The wild suite through a bench run on the CPU: a tiny installed package's kernel (written here) loads, starts
correct against itself and passes against PyTorch's op; FlagGems's softmax, where FlagGems is installed, is checked
as the GPU's program is, unchanged, and starts correct against itself."""

import importlib.util

import pytest

from klineage.bench import run_bench
from klineage.bench.metrics import suite_shares
from klineage.bench.suites import wild_instances
from klineage.config import Settings
from klineage.suites import wild
from tests.unit.test_wild_suite import tiny_kernel, tinywild  # noqa: F401  (the fixture)

pytestmark = pytest.mark.interpreter


def test_a_tiny_wild_kernel_loads_starts_and_passes_against_pytorch(tinywild, data_dir, sandbox):  # noqa: F811
    settings = Settings.from_env(data_dir=data_dir, seeds=2)
    instances, left = wild_instances(settings, (tiny_kernel(),))
    result = run_bench(instances, ["blind"], 2, settings, "cpu", None, not_offered=left)
    assert result["skipped"] == {} and result["rejections"] == {}
    assert result["checks"]["tiny_double"]["status"] == "pass"
    (row,) = result["rows"]
    assert row["instance"] == "tiny_double" and row["escapes"] == [] and row["retimed_speedup"] is None
    (shares,) = suite_shares(result).values()
    assert (shares["loaded"], shares["started"], shares["pass_against_pytorch"]) == (1, 1, 1)


@pytest.mark.skipif(importlib.util.find_spec("flag_gems") is None, reason="needs FlagGems (not installed in CI)")
def test_flag_gems_softmax_is_checked_unchanged(data_dir, sandbox, monkeypatch):
    monkeypatch.setenv("GEMS_VENDOR", "nvidia")
    settings = Settings.from_env(data_dir=data_dir, seeds=2)
    (kernel,) = [k for k in wild.catalogue() if k.name == "gems_softmax"]
    instances, _ = wild_instances(settings, (kernel,))
    result = run_bench(instances, ["blind"], 2, settings, "cpu", None)
    # the program as written, with CUDA mapped to the CPU in the candidate, matches PyTorch's softmax
    assert result["checks"]["gems_softmax"]["status"] == "pass"
    # and its workload loads and its start passes against itself: the original (FlagGems asks the CUDA driver at
    # import) runs in a confined reference process with CUDA mapped, never in the judge (gates.confined)
    assert "gems_softmax" not in result["rejections"] and "gems_softmax" not in result["skipped"]
