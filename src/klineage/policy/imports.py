"""Imports and what they bind: the allow-list applied to every import statement of a module (at any depth), and the
names each import binds, so the other rules know a module from a function and an allowed module from the
program's own."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from klineage.policy.names import NAMED, allowed_tree, installed_source, kernel_package, resolve, top_level_kind


@dataclass(frozen=True)
class Binding:
    """What an imported name is: `kind` "module" (an allowed module), "object" (a name from an allowed module),
        "own_module" (one of the program's modules), "own_package" (a package above them), "own_object" (a name
        from the program's modules or an installed kernel package), "refused" (bound by an import the policy refuses:
    every use is refused too, so a rewrite that only uses a name the trusted text imported is still judged); `path`
    its dotted name."""

    kind: str
    path: str

    @property
    def is_module(self) -> bool:
        return self.kind in ("module", "own_module", "own_package")


@dataclass(frozen=True)
class Own:
    """The program's own modules (override dotted names, with their sources) and the packages they belong to."""

    modules: dict[str, str]

    @property
    def packages(self) -> set[str]:
        return {name.split(".")[0] for name in self.modules}

    def is_parent(self, dotted: str) -> bool:
        return any(name.startswith(dotted + ".") for name in self.modules)


MAX_REEXPORT = 4  # `from a import f` where a itself did `from b import f`: followed this many times


def from_import(own: Own, module: str, name: str, depth: int = 0) -> tuple[str | None, Binding | None]:
    """(why refused, binding) of `from module import name`."""
    if name.startswith("_") and module != "__future__":
        return f"from {module} import {name}: a private name", None
    if module in own.modules or kernel_package(module) or module.split(".")[0] in own.packages:
        return _from_source(own, module, name, depth)
    root = module.split(".")[0]
    if module in NAMED:
        if name in NAMED[module]:
            return None, Binding("object", f"{module}.{name}")
        return f"from {module} import {name}: not among the names allowed from {module}", None
    if not allowed_tree(root) or root in NAMED:
        return f"from {module} import ...: module {module} is not allowed", None
    found = resolve(root, [*module.split(".")[1:], name])
    if found.problem:
        return f"from {module} import {name}: {found.problem}", None
    return None, Binding("module" if found.is_module else "object", found.path)


def _from_source(own: Own, module: str, name: str, depth: int) -> tuple[str | None, Binding | None]:
    """A name from one of the program's modules or an installed kernel package's module: it must be defined in
    that module's own source (a re-exported module object would hand over everything it imported)."""
    if f"{module}.{name}" in own.modules:
        return None, Binding("own_module", f"{module}.{name}")
    source = own.modules.get(module)
    if source is None:
        source = installed_source(module)
    if source is None:
        if own.is_parent(module):
            return f"from {module} import {name}: not one of the program's modules", None
        return f"from {module} import {name}: no installed source for {module}", None
    kind = top_level_kind(source, name)
    if kind == "def":
        return None, Binding("own_object", f"{module}.{name}")
    if kind and kind.startswith("from ") and depth < MAX_REEXPORT:
        origin, original = kind[5:].split(":")
        why, binding = from_import(own, origin, original, depth + 1)
        return (f"from {module} import {name}: {why}", None) if why else (None, binding)
    kinds = {"module": "a module", "alias": "an alias of another name there, not a definition"}
    what = kinds.get(kind or "", "not defined there")
    return f"from {module} import {name}: {what}", None


def import_module(own: Own, dotted: str, asname: str | None) -> tuple[str | None, dict[str, Binding]]:
    """(why refused, bindings) of `import dotted [as asname]`."""
    bound = asname or dotted.split(".")[0]
    if dotted in own.modules:
        kind = "own_module" if asname else ("own_module" if "." not in dotted else "own_package")
        return None, {bound: Binding(kind, dotted if asname or "." not in dotted else dotted.split(".")[0])}
    if own.is_parent(dotted):
        return None, {bound: Binding("own_package", dotted if asname else dotted.split(".")[0])}
    root = dotted.split(".")[0]
    if dotted in NAMED and "." not in dotted:
        return None, {bound: Binding("module", dotted)}
    if kernel_package(dotted) or root in own.packages:
        return f"import {dotted}: import names from it (from {dotted} import ...), not the module", {}
    if not allowed_tree(root) or root in NAMED:
        return f"import {dotted}: not an allowed module", {}
    found = resolve(root, dotted.split(".")[1:])
    if found.problem:
        return f"import {dotted}: {found.problem}", {}
    return None, {bound: Binding("module", dotted if asname else root)}


def bindings(tree: ast.AST, own: Own) -> tuple[dict[str, Binding], list[tuple[int, str, str]]]:
    """Every import in `tree`: the names bound and the refusals as (line, rule, detail)."""
    bound: dict[str, Binding] = {}
    refused: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                why, more = import_module(own, alias.name, alias.asname)
                bound.update(more)
                root = alias.name.split(".")[0]
                if why:
                    refused.append((node.lineno, "import", why))
                # `import torch.distributed.tensor` binds `torch`, which stays what it is; `import os.path`, os
                if why and (alias.asname or not (allowed_tree(root) or root in NAMED or root in own.packages)):
                    bound[alias.asname or root] = Binding("refused", alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                refused.append((node.lineno, "import", "a relative import (name the module)"))
                continue
            for alias in node.names:
                if alias.name == "*":
                    refused.append((node.lineno, "import", f"from {node.module} import *"))
                    continue
                why, binding = from_import(own, node.module or "", alias.name)
                if why:
                    refused.append((node.lineno, "import", why))
                    bound[alias.asname or alias.name] = Binding("refused", f"{node.module}.{alias.name}")
                elif binding is not None:
                    bound[alias.asname or alias.name] = binding
    return bound, refused
