"""Modules import only from modules before them in pipeline order (DESIGN.md: Layout and style)."""

import ast
from pathlib import Path

import klineage

ORDER = ["config", "workload", "program", "compare", "interp", "guards", "sass", "sandbox", "timing", "gates",
         "cache", "check", "audit", "cli", "__main__"]  # fmt: skip
PACKAGE = Path(klineage.__file__).parent


def test_every_module_is_placed():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(ORDER), f"place new modules in ORDER: {modules ^ set(ORDER)}"


def test_imports_follow_pipeline_order():
    for name in ORDER:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("klineage."):
                dep = node.module.split(".")[1]
                assert ORDER.index(dep) < ORDER.index(name), f"{name} imports {dep}, which comes later"
