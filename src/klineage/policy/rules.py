"""The syntax rules of the policy, one pass over a module's tree: names, attributes, assignments, decorators and
classes. What depends on where code runs (forward, a Triton kernel, a launch callback) is in `policy.flow`."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from klineage.policy.imports import Binding, Own
from klineage.policy.names import (
    FRAME_ATTRIBUTES,
    HOST_METHODS,
    LAUNCH_HOOK_ATTRIBUTES,
    LITERAL_NAME_BUILTINS,
    SAFE_BUILTINS,
    SAFE_DUNDER_NAMES,
    SAFE_DUNDERS,
    SCALAR_SINKS,
    installed_source,
    resolve,
    top_level_kind,
)

DYNAMIC_CODE = {"eval", "exec", "compile", "__import__", "breakpoint"}
COMPUTED_ACCESS = {"getattr", "hasattr", "setattr", "delattr", "vars", "globals", "locals", "dir", "type"}
SELF_NAMES = ("self", "cls")


@dataclass(frozen=True)
class Finding:
    """One thing the policy refuses: the rule (a stable id), the module ("program" or an override's dotted
    name), the line, and what was found."""

    rule: str
    module: str
    line: int
    detail: str

    def as_dict(self) -> dict:
        return {"rule": self.rule, "module": self.module, "line": self.line, "detail": self.detail}

    def __str__(self) -> str:
        return f"{self.module} line {self.line}: {self.rule}: {self.detail}"


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """`a.b.c` as ("a", ["b", "c"]); None when the chain does not start at a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, parts[::-1]) if isinstance(node, ast.Name) else None


def with_parents(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    return tree


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (assignments, parameters, definitions, loop and handler targets):
    a name outside this set is a builtin, and only SAFE_BUILTINS may be used."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name.split(".")[0]) for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
    return bound


def own_private(tree: ast.AST) -> set[str]:
    """Names starting with one underscore that the program gives its own objects (`self._x = ...`, a method or
    class attribute `_x`): only these may be read through `self` or `cls`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr.startswith("_"):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return {n for n in names if n.startswith("_") and not is_dunder(n)}


class Rules:
    """The syntax rules over one module; `findings` collects (line, rule, detail)."""

    def __init__(self, tree: ast.AST, bound: dict[str, Binding], own: Own):
        self.tree, self.imports, self.own = tree, bound, own
        self.bound = bound_names(tree)
        self.private = own_private(tree)
        self.top_level = {n.name for n in getattr(tree, "body", []) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        self.aliases = aliases(tree, set(bound) | self.top_level)
        self.findings: list[tuple[int, str, str]] = []

    def add(self, node: ast.AST, rule: str, detail: str) -> None:
        self.findings.append((getattr(node, "lineno", 0), rule, detail))

    def run(self) -> list[tuple[int, str, str]]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                self.name(node)
            elif isinstance(node, ast.Attribute):
                self.attribute(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.definition(node)
            elif isinstance(node, ast.ClassDef):
                self.definition(node)
                self.class_bases(node)
        return self.findings

    # --- names ----------------------------------------------------------------------------------------------

    def name(self, node: ast.Name) -> None:
        name = node.id
        if is_dunder(name) and name not in SAFE_DUNDER_NAMES:
            self.add(node, "private_name", f"{name}: interpreter internals")
            return
        if not isinstance(node.ctx, ast.Load):
            return
        binding = self.imports.get(name)
        if binding is not None and binding.kind == "refused":
            self.add(node, "import", f"{name}: bound by an import the policy refuses ({binding.path})")
        elif binding is not None and binding.is_module and not _is_attribute_base(node):
            self.add(node, "module_value", f"module {binding.path} used as a value (only `{name}.<name>` may be)")
        if name in SCALAR_SINKS and name not in self.bound and _sink_by_another_name(node):
            self.add(node, "scalar_alias", f"{name} as a value: a scalar read under another name (f = {name})")
        if name in self.bound or name in SAFE_BUILTINS:
            return
        if name in LITERAL_NAME_BUILTINS and _literal_name_call(node):
            target = chain(node.parent.args[0])
            if name == "getattr" and target is not None and (target[0] in self.imports or target[0] in self.aliases):
                self.add(node, "computed_attribute", "getattr on a module or an imported object: name it (a.b)")
            return
        if name in DYNAMIC_CODE:
            self.add(node, "dynamic_code", f"{name}: runs code built at run time")
        elif name in COMPUTED_ACCESS:
            self.add(node, "computed_attribute", f"{name}: attribute or namespace access by computed name")
        else:
            self.add(node, "builtin", f"{name}: not a builtin a program may use")

    # --- attributes -----------------------------------------------------------------------------------------

    def attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if is_dunder(attr):
            if attr not in SAFE_DUNDERS:
                self.add(node, "private_attribute", f".{attr}: interpreter internals")
        elif attr.startswith("_"):
            receiver = node.value
            if not (isinstance(receiver, ast.Name) and receiver.id in SELF_NAMES and attr in self.private):
                self.add(node, "private_attribute", f".{attr}: a private name of an object the program did not make")
        if attr in FRAME_ATTRIBUTES:
            self.add(node, "frame_attribute", f".{attr}: frame, code or traceback internals")
        if attr in LAUNCH_HOOK_ATTRIBUTES:
            self.add(node, "launch_hook", f".{attr}: runs program code inside a launch, where no ban is watched")
        if attr in ("format", "format_map"):
            self.add(node, "format", f".{attr}: format strings read attributes by name ('{{0.x}}')")
        if not isinstance(node.ctx, ast.Load):
            self.assignment(node)
        if not isinstance(getattr(node, "parent", None), ast.Attribute):
            self.dotted(node)

    def assignment(self, node: ast.Attribute) -> None:
        found = chain(node)
        if node.attr == "data":
            self.add(node, "monkeypatch", ".data = ...: swaps a tensor's storage")
        if found is None:
            return
        root, _ = found
        if root in self.imports or root in self.top_level or root in self.aliases:
            what = "a class or function of the program" if root in self.top_level else "an imported module or object"
            self.add(node, "monkeypatch", f"assigns {ast.unparse(node)} (an attribute of {what})")

    def dotted(self, node: ast.Attribute) -> None:
        """A whole chain `a.b.c` on an imported name: resolved on allowed modules, followed into own modules."""
        found = chain(node)
        if found is None or found[0] not in self.imports:
            return
        root, segments = found
        binding = self.imports[root]
        if binding.kind in ("module", "object"):
            head = binding.path.split(".")
            resolved = resolve(head[0], [*head[1:], *segments])
            if resolved.problem:
                self.add(node, "module_reach", resolved.problem)
            elif resolved.is_module:
                self.add(node, "module_value", f"module {resolved.path} used as a value")
        elif binding.kind in ("own_module", "own_package"):
            self.own_chain(node, binding.path, segments)

    def own_chain(self, node: ast.AST, base: str, segments: list[str]) -> None:
        path = base
        for seg in segments:
            if path in self.own.modules:
                kind = top_level_kind(self.own.modules[path], seg)
                if kind != "def" and f"{path}.{seg}" not in self.own.modules:
                    self.add(node, "module_reach", f"{path}.{seg}: not defined in the program's module {path}")
                return
            path = f"{path}.{seg}"
            if path not in self.own.modules and not self.own.is_parent(path):
                self.add(node, "module_reach", f"{path}: not one of the program's modules")
                return
        if path not in self.own.modules or not segments:
            self.add(node, "module_value", f"module {path} used as a value")

    # --- definitions, decorators, classes, calls --------------------------------------------------------------

    def definition(self, node) -> None:
        if is_dunder(node.name) and node.name != "__init__":
            self.add(node, "dunder_def", f"defines {node.name}: hooks into the interpreter or PyTorch's dispatch")
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if chain(target) is None:
                self.add(decorator, "decorator", f"@{ast.unparse(decorator)[:60]}: only a named decorator")

    def class_bases(self, node: ast.ClassDef) -> None:
        for keyword in node.keywords:
            self.add(node, "class_base", f"class {node.name}({keyword.arg}=...): a metaclass or class keyword")
        for base in node.bases:
            found = chain(base)
            if found is None:
                self.add(node, "class_base", f"class {node.name}: base {ast.unparse(base)[:60]} is not a name")
            elif _is_tensor(found, self.imports):
                self.add(node, "class_base", f"class {node.name}: a torch.Tensor subclass")


def aliases(tree: ast.AST, roots: set[str]) -> set[str]:
    """Names bound anywhere to an attribute chain of an imported object or a program's class (`T = torch.Tensor`):
    assigning their attributes patches the object itself."""
    found: set[str] = set()
    for _ in range(3):  # aliases of aliases
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and (value := chain(node.value)) is not None:
                if value[0] in roots | found:
                    found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


SINK_PASSERS = ("isinstance", "issubclass", "map", "filter", "sorted", "min", "max")  # policy.flow judges map & co.


def _sink_by_another_name(node: ast.Name) -> bool:
    """`float` (or another scalar-reading builtin) used other than called by its name: bound to another name or
    put in a container, where `policy.flow` would not see the call. Annotations, type tests and the argument of
    map, sorted and the like (which `policy.flow` judges) are not."""
    parent, child = getattr(node, "parent", None), node
    while isinstance(parent, (ast.Tuple, ast.BinOp)):  # (int, float), int | float
        parent, child = getattr(parent, "parent", None), parent
    if isinstance(parent, ast.Call):
        return child is not parent.func and not (isinstance(parent.func, ast.Name) and parent.func.id in SINK_PASSERS)
    if isinstance(parent, ast.keyword):
        call = getattr(parent, "parent", None)
        return not (isinstance(call.func, ast.Name) and call.func.id in SINK_PASSERS)
    annotation = isinstance(parent, ast.arg) or isinstance(parent, (ast.AnnAssign, ast.FunctionDef, ast.Subscript))
    return not annotation


def _is_attribute_base(node: ast.Name) -> bool:
    parent = getattr(node, "parent", None)
    return isinstance(parent, ast.Attribute) and parent.value is node


def _literal_name_call(node: ast.Name) -> bool:
    """getattr(obj, "name"[, default]) / hasattr(obj, "name") with a literal public name: plain attribute access."""
    call = getattr(node, "parent", None)
    if not (isinstance(call, ast.Call) and call.func is node and not call.keywords and 2 <= len(call.args) <= 3):
        return False
    name = call.args[1]
    ok = isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()
    banned = FRAME_ATTRIBUTES | HOST_METHODS.keys() | {"format", "format_map", "data"}
    return ok and not name.value.startswith("_") and name.value not in banned


def _is_tensor(found: tuple[str, list[str]], imports: dict[str, Binding]) -> bool:
    root, segments = found
    binding = imports.get(root)
    if binding is None or binding.kind not in ("module", "object"):
        return False
    head = binding.path.split(".")
    resolved = resolve(head[0], [*head[1:], *segments])
    obj = resolved.obj
    import torch

    return isinstance(obj, type) and issubclass(obj, torch.Tensor)


__all__ = ["Finding", "Rules", "chain", "installed_source", "is_dunder", "with_parents"]
