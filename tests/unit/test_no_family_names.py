"""The forward walk asks a family what is particular to it through the family's own hooks (klineage.transform):
no proposer and not optimize names a transform id or imports a family module. Each GPU run that found a family's
special case had added it to the proposers (44 names in one file); it belongs on the family."""

import ast
from pathlib import Path

import klineage
from klineage.transform import load_families

PACKAGE = Path(klineage.__file__).parent
FILES = [*sorted((PACKAGE / "proposers").glob("*.py")), PACKAGE / "optimize.py"]


def _imports(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_no_proposer_names_a_family_or_imports_one():
    ids = set(load_families())
    assert FILES[0].parent.name == "proposers" and len(FILES) > 2
    for file in FILES:
        tree = ast.parse(file.read_text())
        named = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in ids})
        assert not named, f"{file.name} names transform ids {named}: ask the family (a Transform hook)"
        family_imports = [m for m in _imports(tree) if m.startswith("klineage.transforms")]
        assert not family_imports, f"{file.name} imports {family_imports}: the family's rules live on the family"


def test_no_module_outside_the_transforms_package_imports_its_private_modules():
    for file in sorted(PACKAGE.rglob("*.py")):
        if "transforms" in file.relative_to(PACKAGE).parts[:1]:
            continue
        private = [m for m in _imports(ast.parse(file.read_text())) if m.startswith("klineage.transforms._")]
        assert not private, f"{file.relative_to(PACKAGE)} imports {private}"
