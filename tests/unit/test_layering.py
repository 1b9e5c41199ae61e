"""Modules import only from modules before them in pipeline order (DESIGN.md: Layout and style)."""

import ast
from pathlib import Path

import klineage

ORDER = [
    "config",
    "isolation",
    "shrink",
    "workload",
    "program",
    "policy",
    "features",
    "compare",
    "wire",
    "interp",
    "cuda_on_cpu",
    "guards",
    "sass",
    "outcome",
    "sandbox",
    "timing",
    "gpu_busy",
    "gates",
    "cache",
    "check",
    "sanitize",
    "audit",
    "carry",
    "transform",
    "launch_config",
    "likeness",
    "transforms",
    "mine",
    "probe",
    "probing",
    "skills",
    "library",
    "mining",
    "effects",
    "reference",
    "scale",
    "suites",
    "llm",
    "llm_mine",
    "conditions",
    "proposers",
    "llm_propose",
    "trajectory",
    "optimize",
    "optimize_many",
    "bench",
    "llm_compare",
    "mcp_server",
    "cli",
    "__main__",
]
PACKAGE = Path(klineage.__file__).parent


def test_every_module_is_placed():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    modules |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and p.name != "examples"}
    assert modules == set(ORDER), f"place new modules in ORDER: {modules ^ set(ORDER)}"


def _files(name: str) -> list[Path]:
    """A module's file, or every file of a subpackage (the family modules of `transforms`)."""
    path = PACKAGE / name
    return sorted(path.glob("*.py")) if path.is_dir() else [PACKAGE / f"{name}.py"]


def test_imports_follow_pipeline_order():
    for name in ORDER:
        for file in _files(name):
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("klineage."):
                    dep = node.module.split(".")[1]
                    if dep == name:
                        continue  # within a subpackage
                    assert ORDER.index(dep) < ORDER.index(name), f"{file.name} imports {dep}, which comes later"
