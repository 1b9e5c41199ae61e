"""The atomic row sum's work per program (CHUNK), retuned by the launch-configuration search, on the CPU: a larger
chunk is right; a chunk narrower than the loop's tile makes neighbouring programs add the same columns twice, and
the correctness gate says so."""

import pytest

from klineage.check import check
from klineage.launch_config import with_values
from klineage.program import Program
from klineage.suites import SUITES
from klineage.workload import load_workload

pytestmark = pytest.mark.interpreter


def test_a_larger_chunk_passes_and_one_narrower_than_the_tile_fails(settings, sandbox):
    folder = SUITES["heldout"] / "atomic_rowsum"
    wl, source = load_workload(folder / "workload.py"), (folder / "naive.py").read_text()
    for chunk, right in ((2048, True), (64, False)):
        report = check(
            wl,
            Program("atomic_rowsum", with_values(source, {"CHUNK": chunk})),
            settings,
            "cpu",
            ("compile", "correctness"),
            sandbox,
        )
        assert report.verdicts[-1].passed is right, (chunk, report.verdicts[-1].reason)
