"""Every test gets its own data directory (verdict cache, ceilings), so no test sees another's cache.

Tiers, chosen by what a test needs, never by hand (docs/contributing.md):

- `fast`: runs no program: no sandbox child, no Triton interpreter, no GPU. What a plain `pytest` runs.
- `interpreter`: runs programs in sandbox children on the CPU (kernels through the Triton interpreter). A test is here
  when it uses the `sandbox` fixture, directly or through another fixture (the mined experts below), carries the
  `interpreter` marker (the CLI and the `check`/`mine`/`optimize` entry points start a sandbox of their own), or lives
  in tests/interpreter or tests/quality.
- `gpu`: carries the `gpu` marker or lives in tests/gpu; skipped without a CUDA GPU.

`pytest` runs `fast`; `--tier interpreter` adds the interpreter tier with one case of each `sweep` (a long
parametrized test: the held-out suite, the adversarial corpus, the bundled examples); `--tier gpu` adds the GPU tier;
`--tier all` runs everything, every sweep in full. Naming test paths or a `-m` expression on the command line runs
every tier of what was named. A fast test that starts a sandbox child or sets TRITON_INTERPRET fails
(`_fast_runs_no_program`), so a test that forgets to declare its need cannot hide in the fast tier.
"""

from __future__ import annotations

import os
import pickle
import subprocess
from pathlib import Path

import pytest

from klineage.config import Settings, cuda_available
from klineage.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "src" / "klineage" / "examples"
# sandbox children import test-only job functions (tests.fixtures.crashers) by module name
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

TIERS = ("fast", "interpreter", "gpu")
CHOICES = {"fast": {"fast"}, "interpreter": {"fast", "interpreter"}, "gpu": {"fast", "gpu"}, "all": set(TIERS)}
_TIER = pytest.StashKey[str]()


def pytest_addoption(parser):
    parser.addoption(
        "--tier",
        choices=tuple(CHOICES),
        default=None,
        help="fast (the default: runs no program), interpreter (adds the Triton-interpreter tests, one case of each "
        "sweep), gpu (adds the GPU tests), all (everything, every sweep in full). Named paths or -m: all.",
    )


def _chosen(config) -> str:
    given = config.getoption("tier")
    if given:
        return given
    named = config.args_source == pytest.Config.ArgsSource.ARGS or config.option.markexpr
    return "all" if named else "fast"


def tier_of(item) -> str:
    """What the test needs, from its markers, its fixtures (the whole closure) and where it lives."""
    parts = Path(str(item.path)).relative_to(ROOT).parts[:2]
    if item.get_closest_marker("gpu") or parts == ("tests", "gpu"):
        return "gpu"
    if (
        "sandbox" in item.fixturenames
        or item.get_closest_marker("interpreter")
        or parts in {("tests", "interpreter"), ("tests", "quality")}
    ):
        return "interpreter"
    return "fast"


def _left_out(config) -> str:
    chosen = _chosen(config)
    out = [t for t in TIERS if t not in CHOICES[chosen]]
    line = f"klineage tiers: {chosen}"
    if chosen == "interpreter":
        line += " (one case of each sweep)"
    if out:
        line += f"; left out: {', '.join(out)} (run them: pytest --tier interpreter | gpu | all; docs/contributing.md)"
    return line


def pytest_report_header(config):
    return [_left_out(config)]


def pytest_sessionstart(session):
    """-q hides the header: the tiers' line is written anyway, it says what a green run did not run."""
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None and session.config.get_verbosity() < 0:
        terminal.write_line(_left_out(session.config))


def _stands_for_its_sweep(item, swept: set) -> bool:
    """Below --tier all, one case stands for a `sweep`: the one its marker names (`case=` a parametrization id), else
    the first collected."""
    marker = item.get_closest_marker("sweep")
    if marker is None:
        return True
    named, sweep = marker.kwargs.get("case"), item.nodeid.split("[")[0]
    if named is not None:
        swept.add((sweep, named))
        if getattr(getattr(item, "callspec", None), "id", None) != named:
            return False
        swept.add((sweep, None))
        return True
    if (sweep, None) in swept:
        return False
    swept.add((sweep, None))
    return True


@pytest.hookimpl(tryfirst=True)  # before -m, which may then select by the tier a test was given
def pytest_collection_modifyitems(config, items):
    chosen = _chosen(config)
    keep, drop, swept = [], [], set()
    for item in items:
        tier = tier_of(item)
        item.stash[_TIER] = tier
        if tier != "fast" and not item.get_closest_marker(tier):
            item.add_marker(tier)
        if tier not in CHOICES[chosen]:
            drop.append(item)
        elif chosen != "all" and not _stands_for_its_sweep(item, swept):
            drop.append(item)
        else:
            keep.append(item)
    lost = {sweep for sweep, case in swept if case is not None and (sweep, None) not in swept}
    if lost:
        raise pytest.UsageError(f"a sweep names a case it does not have: {sorted(lost)}")
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run through the device tool)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _starts_a_program(args, env) -> bool:
    argv = [str(a) for a in ([args] if isinstance(args, str | os.PathLike) else args)]
    named = any(a in ("klineage", "klineage.sandbox") and p == "-m" for p, a in zip(argv, argv[1:], strict=False))
    return named or (argv and Path(argv[0]).name == "klineage") or bool((env or {}).get("TRITON_INTERPRET"))


@pytest.fixture(autouse=True)
def _fast_runs_no_program(request, monkeypatch):
    """A fast test that starts a sandbox child (or a `klineage` process, or any child with TRITON_INTERPRET) fails
    there and then: its need was not declared. Say it with the `sandbox` fixture or the `interpreter` marker."""
    if request.node.stash.get(_TIER, "fast") != "fast":
        yield
        return
    before = os.environ.get("TRITON_INTERPRET")
    started = []

    class Guarded(subprocess.Popen):
        def __init__(self, args, *rest, **kwargs):
            if _starts_a_program(args, kwargs.get("env")):
                started.append(args)
                pytest.fail(f"a fast test started a program ({args}): declare its need (docs/contributing.md)")
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Guarded)
    yield
    passed = request.node.stash.get(_PASSED, False)  # a start swallowed (in a thread, by an except) fails here
    if (started and passed) or os.environ.get("TRITON_INTERPRET") != before:
        pytest.fail(f"a fast test ran a program or set TRITON_INTERPRET ({started}): declare its need")


_PASSED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    return report


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


def _mined(name: str, tmp_path_factory, sandbox):
    """(settings, lineage, skills) of tests/fixtures/<name>, mined and probed on the CPU once per test run.

    Under pytest-xdist the first worker to ask mines into a folder beside the workers' own (pytest-xdist's recipe: a
    file lock and a cache under the base temporary directory's parent) and pickles what it returns; the others wait
    on the lock and read that copy. Tests only read the data directory (the forward walk adds verdicts to its
    cache, as it did when each worker mined its own)."""
    from filelock import FileLock

    from klineage.mine import mine
    from klineage.probing import probe_lineage
    from klineage.program import load_program
    from klineage.skills import skills_from_lineage
    from klineage.workload import load_workload

    def produce(home: Path):
        settings = Settings(data_dir=home, seeds=3)
        workload = load_workload(FIXTURES / name / "workload.py")
        lineage = mine(workload, load_program(FIXTURES / name / "expert.py"), settings, "cpu", sandbox)
        probes = probe_lineage(lineage, workload, settings, "cpu", sandbox)
        return settings, lineage, skills_from_lineage(lineage, probes)

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return produce(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / "mined"
    shared.mkdir(exist_ok=True)
    done = shared / f"{name}.pickle"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_file():
            done.write_bytes(pickle.dumps(produce(shared / name)))
        return pickle.loads(done.read_bytes())


@pytest.fixture(scope="session")
def planted(tmp_path_factory, sandbox):
    """(settings, lineage, skills) of tests/fixtures/planted: four planted optimizations and a guard."""
    return _mined("planted", tmp_path_factory, sandbox)


@pytest.fixture(scope="session")
def probed(tmp_path_factory, sandbox):
    """(settings, lineage, skills) of tests/fixtures/probed: four optimizations whose conditions only probes show."""
    return _mined("probed", tmp_path_factory, sandbox)


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
