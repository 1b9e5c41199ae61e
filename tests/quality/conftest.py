"""Mined lineages shared by the quality tests: each fixture expert is mined and probed once per session."""

import pytest

from klineage.config import Settings
from klineage.mine import mine
from klineage.probing import probe_lineage
from klineage.program import load_program
from klineage.skills import skills_from_lineage
from klineage.workload import load_workload
from tests.conftest import FIXTURES


def _mine(name: str, tmp_path_factory, sandbox):
    settings = Settings(data_dir=tmp_path_factory.mktemp(name), seeds=3)
    workload = load_workload(FIXTURES / name / "workload.py")
    lineage = mine(workload, load_program(FIXTURES / name / "expert.py"), settings, "cpu", sandbox)
    probes = probe_lineage(lineage, workload, settings, "cpu", sandbox)
    return settings, lineage, skills_from_lineage(lineage, probes)


@pytest.fixture(scope="session")
def planted(tmp_path_factory, sandbox):
    """(settings, lineage, skills) of tests/fixtures/planted."""
    return _mine("planted", tmp_path_factory, sandbox)


@pytest.fixture(scope="session")
def probed(tmp_path_factory, sandbox):
    """(settings, lineage, skills) of tests/fixtures/probed."""
    return _mine("probed", tmp_path_factory, sandbox)
