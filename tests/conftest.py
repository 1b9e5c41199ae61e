"""Every test gets its own data directory (verdict cache, ceilings), so no test sees another's cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from klineage.config import Settings, cuda_available
from klineage.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "src" / "klineage" / "examples"
# sandbox children import test-only job functions (tests.fixtures.crashers) by module name
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "klineage-home"))
    return tmp_path / "klineage-home"


@pytest.fixture(scope="session")
def sandbox():
    """One warm server for the whole session: what a user's long run gets too."""
    with Sandbox(warm=True) as sb:
        yield sb


@pytest.fixture
def settings(data_dir) -> Settings:
    return Settings.from_env(data_dir=data_dir, seeds=3)


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run through the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


_CONFIG = None  # the session's config: under xdist the controller gets the reports and writes them


def pytest_configure(config):
    global _CONFIG
    _CONFIG = config


def pytest_runtest_logreport(report):
    """A GPU test's failure is written out when it happens, not only in the summary at the session's end: a device
    call cut by its time limit loses that summary (session 22 lost why a contiguity probe test failed that way)."""
    if not (report.failed and "gpu" in report.keywords and _CONFIG is not None):
        return
    terminal = _CONFIG.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(f"\n--- {report.nodeid} failed in {report.when}:\n{report.longreprtext}\n---")


@pytest.fixture(scope="session")
def gpu_home(tmp_path_factory):
    """GPU tests share one data directory so the device's ceilings are measured once per session."""
    return tmp_path_factory.mktemp("klineage-gpu-home")
