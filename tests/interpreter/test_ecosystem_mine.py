"""One ecosystem expert mined end to end on the CPU (Liger-Kernel's squared ReLU, installed in CI): the pair is
written under the data directory, the installed module's copy is walked for two steps, and the row reports them."""

import json

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.config import Settings
from klineage.library import Library
from klineage.suites.ecosystem import ECOSYSTEM, mine_expert

pytest.importorskip("liger_kernel")


def test_mine_one_liger_expert(tmp_path, sandbox):
    settings = Settings(data_dir=tmp_path / "home", seeds=2)
    expert = ECOSYSTEM["liger_relu_squared"]
    seen = []
    with Library(tmp_path / "library") as library:
        row = mine_expert(
            expert, library, settings, "cpu", sandbox=sandbox, max_steps=2, probe=False, on_step=seen.append
        )
        saved = library.list()
    assert row.status == "mined", row.error
    assert (settings.data_dir / "ecosystem" / expert.name / "workload.py").is_file()
    assert row.accepted + row.rejected == len(seen) == 2 and not row.finished
    assert all(step.module == "liger_kernel.ops.relu_squared" for step in seen)  # the installed module's copy
    assert sum(len(ts) for ts in row.families.values()) >= 1 and all(f > 0 for f in row.families)
    assert row.skills == len(saved) == 2 and 0 < row.walk_s <= row.wall_s


def test_command_reports_a_missing_package_and_a_mined_expert(tmp_path, monkeypatch):
    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    missing = ECOSYSTEM["gems_reglu"]
    if missing.installed():
        pytest.skip("FlagGems is installed here: no expert to report missing")
    args = ["mine-ecosystem", "--only", "gems_reglu,liger_relu_squared", "--device", "cpu", "--max-steps", "1"]
    result = CliRunner().invoke(main, [*args, "--no-probe", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)["rows"]}
    assert rows["gems_reglu"]["status"] == "not installed"
    assert rows["liger_relu_squared"]["status"] == "mined" and rows["liger_relu_squared"]["accepted"] == 1
