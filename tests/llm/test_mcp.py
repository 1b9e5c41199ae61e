"""`klineage mcp` through the official MCP Python SDK's client over stdio: a real server process, the tools listed
and called (search, suggest, apply, and the gates catching a cheating program), skill cards read as resources."""

import json
import os
import sys

import anyio
import pytest

from klineage.library import Library
from tests.conftest import EXAMPLES, ROOT
from tests.llm.programs import CHEAT
from tests.llm.skills import llm_skill
from tests.optimize.skillmaker import make_skill

WORKLOAD, NAIVE_PATH = EXAMPLES / "softmax" / "workload.py", EXAMPLES / "softmax" / "naive.py"
KNOBS = "launch_knobs.test.s0"


def _structured(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        data = result.structured_content
        return data.get("result", data) if set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def _session(library, home, body):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {
        "KLINEAGE_HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "klineage", "mcp", "--library", str(library)], env=env, cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await body(session)


@pytest.mark.interpreter
def test_an_agent_uses_the_mcp_server_over_stdio(tmp_path):
    pytest.importorskip("mcp")
    library = tmp_path / "library"
    with Library(library) as lib:
        lib.save(make_skill("launch_knobs", {"num_warps": "8"}, ("shared_memory_fits",)))
        lib.save(llm_skill("exp2", 0))

    async def body(session):
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {"search_skills", "suggest_skills", "apply_skill", "check_program"}
        resources = {str(r.uri) for r in (await session.list_resources()).resources}
        assert f"skill://{KNOBS}" in resources and "skill://llm_rewrite.softmax.exp2.s0" in resources
        text = (await session.read_resource(f"skill://{KNOBS}")).contents[0].text
        assert text.startswith("# launch_knobs") and "## Conditions" in text and "shared_memory_fits" in text

        found = _structured(await session.call_tool("search_skills", {"query": "launch knobs"}))
        assert [s["id"] for s in found["skills"]] == [KNOBS] and found["skills"][0]["card"] == f"skill://{KNOBS}"
        assert _structured(await session.call_tool("search_skills", {"kind": "guard"}))["count"] == 0
        by_condition = _structured(await session.call_tool("search_skills", {"condition": "contiguous"}))
        assert [s["id"] for s in by_condition["skills"]] == ["llm_rewrite.softmax.exp2.s0"]

        args = {"workload": str(WORKLOAD), "program": str(NAIVE_PATH)}
        suggested = _structured(await session.call_tool("suggest_skills", args))
        assert {c["origin"] for c in suggested["candidates"]} == {KNOBS}
        assert "shared_memory_fits: gated" in suggested["candidates"][0]["decided_by"]
        assert suggested["no_site"] == ["llm_rewrite.softmax.exp2.s0"] and suggested["domain"]["N"] == [1, 32768]

        applied = _structured(await session.call_tool("apply_skill", {"skill_id": KNOBS, **args}))
        assert applied["applied"] and "+" in applied["diff"] and "num_warps=8" in applied["source"]
        missing = await session.call_tool("apply_skill", {"skill_id": "no.such.skill", **args})
        assert missing.is_error and "no skill" in missing.content[0].text

        checked = _structured(
            await session.call_tool(
                "check_program",
                {"workload": str(WORKLOAD), "source": CHEAT, "gates": "compile,correctness", "device": "cpu"},
            )
        )
        assert checked["passed"] is False
        correctness = next(v for v in checked["verdicts"] if v["gate"] == "correctness")
        assert correctness["status"] == "fail" and correctness["code"] == "torch_compute"

    anyio.run(_session, library, tmp_path / "home", body)
