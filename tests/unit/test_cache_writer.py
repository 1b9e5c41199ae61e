"""The verdict cache has one writer, the judge's caller (`check.check`, in the process that starts the sandbox): a
candidate that wrote pass verdicts for another program into the cache made that program pass from it (issue 30,
class 3). What this holds today: no module that runs in a sandbox child opens the cache, only `check` writes
verdicts, and a job's environment names neither the cache nor the data directory. (The job's payload still holds
the `Settings`, and so the data directory, for the judge: keeping it from the candidate is the judge/candidate
split's, and the data directory's mode the isolation's.)"""

import ast
from pathlib import Path

import klineage
from klineage.gates import run_gate
from klineage.gates.common import GateRequest
from klineage.sandbox import SandboxResult

PACKAGE = Path(klineage.__file__).parent
CALLER_SIDE = {"check.py", "library.py", "cache.py"}  # library.py: its index uses cache.Store, not the verdicts


def _uses(path: Path) -> set[str]:
    """Names of `klineage.cache` a file imports, and the cache methods it calls that write verdicts."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "klineage.cache":
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import) and any(alias.name == "klineage.cache" for alias in node.names):
            found.add("klineage.cache")
        elif isinstance(node, ast.Attribute) and node.attr == "put_verdict":
            found.add("put_verdict")
    return found


def test_only_the_judges_caller_opens_the_cache_or_writes_verdicts():
    users = {
        str(path.relative_to(PACKAGE)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in ("examples", "suites") and (uses := _uses(path))
    }
    assert set(users) <= CALLER_SIDE, users
    assert "put_verdict" in users["check.py"]
    assert "put_verdict" not in users.get("library.py", set())


class _Recording:
    def __init__(self):
        self.jobs = []

    def run(self, job):
        self.jobs.append(job)
        return SandboxResult(False, error="not run", kind="exception")


def test_a_jobs_environment_names_neither_the_cache_nor_the_data_directory(settings):
    sandbox = _Recording()
    for gate, device in (("compile", "cpu"), ("correctness", "cpu"), ("correctness", "cuda"), ("profile", "cuda")):
        request = GateRequest("w.py", None, device, settings)
        run_gate(gate, request, sandbox)
    for job in sandbox.jobs:
        told = " ".join(f"{k}={v}" for k, v in job.env.items())
        assert str(settings.data_dir) not in told and str(settings.cache_path) not in told, job.env
