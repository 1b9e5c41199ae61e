"""The agent extras (openai, mcp) are optional: without them these tests are not collected (CI installs them)."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("openai") is None:
    collect_ignore += ["test_client.py", "test_llm_optimize.py", "test_llm_mine.py", "test_llm_compare.py"]
if importlib.util.find_spec("mcp") is None:
    collect_ignore += ["test_mcp.py"]
