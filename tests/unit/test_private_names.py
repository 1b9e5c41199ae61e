"""A module's private names are its own: no module imports another's `_name`, and no module outside a package
imports that package's private modules (`klineage.transforms._anchored`). Where another module needs a name, the
name is public, or the code lives where it is used."""

import ast
from pathlib import Path

import klineage

PACKAGE = Path(klineage.__file__).parent
DATA = ("examples", "suites")  # programs and workloads the gates judge, not modules of the package


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _owner(module: str) -> str:
    """The package a private module belongs to, or the module itself."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:i])
    return module


def private_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in DATA:
            continue
        here = _module_of(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("klineage"):
                owner = _owner(node.module)
                if owner != node.module and not here.startswith(owner):
                    found.append(f"{here} imports the private module {node.module}")
                if node.module != here:
                    found += [f"{here} imports {node.module}.{a.name}" for a in node.names if _private(a.name)]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    owner = _owner(alias.name)
                    if alias.name.startswith("klineage") and owner != alias.name and not here.startswith(owner):
                        found.append(f"{here} imports the private module {alias.name}")
    return found


def test_no_module_imports_another_modules_private_names():
    assert private_imports() == []


def test_the_rule_sees_a_private_import(tmp_path, monkeypatch):
    """The scan itself: a module importing another's private name is reported."""
    fake = tmp_path / "klineage"
    (fake / "transforms").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "transforms" / "__init__.py").write_text("")
    (fake / "transforms" / "_shared.py").write_text("def helper(): pass\n")
    (fake / "a.py").write_text("def _secret(): pass\n")
    (fake / "b.py").write_text("from klineage.a import _secret\nfrom klineage.transforms._shared import helper\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert private_imports() == [
        "klineage.b imports klineage.a._secret",
        "klineage.b imports the private module klineage.transforms._shared",
    ]
