"""The core works without the agents extra: openai and mcp are imported only when a model or the MCP server is
used, and their absence is one line (exit code 2), not a traceback."""

import subprocess
import sys

from click.testing import CliRunner

from klineage.cli import main
from tests.conftest import EXAMPLES

WORKLOAD, NAIVE = EXAMPLES / "softmax" / "workload.py", EXAMPLES / "softmax" / "naive.py"


def test_core_modules_do_not_import_the_agent_packages():
    code = (
        "import sys, klineage.cli, klineage.optimize, klineage.llm, klineage.llm_propose, klineage.llm_mine, "
        "klineage.llm_compare, klineage.mcp_server; "
        "print(sorted(m for m in ('openai', 'mcp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_openai_the_llm_materializer_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` now fails as if it were not installed
    monkeypatch.setenv("KLINEAGE_LLM_MODEL", "m")
    monkeypatch.setenv("KLINEAGE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    args = [
        "optimize",
        str(WORKLOAD),
        str(NAIVE),
        "--materializer",
        "llm",
        "--method",
        "klineage",
        "--library",
        str(tmp_path / "none"),
        "--device",
        "cpu",
    ]
    (tmp_path / "none" / "skills").mkdir(parents=True)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "pip install 'klineage[agents]'" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_without_mcp_the_server_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mcp", None)
    result = CliRunner().invoke(main, ["mcp", "--library", str(tmp_path)])
    assert result.exit_code == 2 and "pip install 'klineage[agents]'" in result.output
