"""Shared machinery for families whose match needs more than one node (a kernel and its launch, a decorator and
the branch it selects) but whose rewrite replaces one anchor node (a function, a statement).

`AnchoredTransform` subclasses say where the expert and the simple forms are, given the whole module
(`expert_anchors`, `plain_anchors`: lists of (anchor node, params)), and how to rewrite one anchor
(`simple`, `optimized`). Sites are numbered in source order of their anchors; a site's `function` is the
function enclosing the anchor (a function anchor names itself). Not a family: registers nothing."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider

from klineage.transform import Site, Transform, dotted, is_jit, node_code, wrapped


class Module:
    """A parsed program with positions and parents resolved, and lookups the families share."""

    def __init__(self, source: str):
        wrapper = wrapped(source)  # one parse and resolve of a program for every family (transform.wrapped)
        self.tree = wrapper.module
        self.positions = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self._functions: list[cst.FunctionDef] | None = None
        self._kernels: dict[str, cst.FunctionDef] | None = None
        self._analyses: dict[tuple, Any] = {}

    def once(self, fn: cst.FunctionDef, analysis: Callable[[cst.FunctionDef], Any]) -> Any:
        """`analysis(fn)`, computed once for this parse: a family that asks it for every name or call in a kernel
        walked the kernel again each time (fp32_upcast's loaded_names, scalar_dtype_pin's scalar_params: 28.5 and
        18.6 s to list the sites of Liger's cross_entropy module on this 2-core machine, RESULTS.md#wild-h100-2)."""
        key = (id(fn), analysis)
        if key not in self._analyses:
            self._analyses[key] = analysis(fn)
        return self._analyses[key]

    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def enclosing(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        while node is not None and not isinstance(node, cst.FunctionDef):
            node = self.parents.get(node)
        return node

    def function_of(self, node: cst.CSTNode) -> str:
        fn = self.enclosing(node)
        return fn.name.value if fn is not None else "<module>"

    def functions(self) -> list[cst.FunctionDef]:
        if self._functions is None:
            self._functions = [n for n in self.positions if isinstance(n, cst.FunctionDef)]
        return self._functions

    def kernels(self) -> dict[str, cst.FunctionDef]:
        if self._kernels is None:
            self._kernels = {f.name.value: f for f in self.functions() if is_jit(f)}
        return self._kernels

    def host_functions(self) -> list[cst.FunctionDef]:
        return [f for f in self.functions() if not is_jit(f)]


def nodes_under(node: cst.CSTNode, kind: type | tuple[type, ...]) -> list:
    """Every node of `kind` under `node` (itself included), in source order: an outer node before those inside it."""
    found: list = []

    class V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kind):
                found.append(n)
            return True

    node.visit(V())
    return found


def calls(node: cst.CSTNode) -> list[cst.Call]:
    """Every call under `node`, in source order (an outer call before the calls in its arguments)."""
    return nodes_under(node, cst.Call)


def launches(node: cst.CSTNode) -> list[cst.Call]:
    """Kernel launches `kernel[grid](...)` under `node`, in source order."""
    return [c for c in calls(node) if isinstance(c.func, cst.Subscript) and isinstance(c.func.value, cst.Name)]


def launch_statement(stmt: cst.CSTNode) -> cst.Call | None:
    """The launch `kernel[grid](...)` that makes up a statement line, or None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    ok = isinstance(call, cst.Call) and isinstance(call.func, cst.Subscript) and isinstance(call.func.value, cst.Name)
    return call if ok else None


def names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    node.visit(V())
    return found


def assignment(stmt: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """(name, value) of a statement line that is only `name = value`, else None."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        a = stmt.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
    return None


def name_uses(node: cst.CSTNode) -> list[str]:
    """Every name under `node`, once per use, in source order (`names_in` keeps each once)."""
    found: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name.value)

    node.visit(V())
    return found


def bound_in(node: cst.CSTNode) -> set[str]:
    """Every name a statement (of any kind, nested blocks included) may rebind: assignment, loop and walrus targets
    (every name in them, so `a[i] = ...` counts `a` and `i`: more than is rebound, never less), `as` names, imports,
    definitions."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            found.update(names_in(n.target))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            found.update(names_in(n.target))

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            found.update(names_in(n.target))

        def visit_For(self, n: cst.For) -> None:
            found.update(names_in(n.target))

        def visit_NamedExpr(self, n: cst.NamedExpr) -> None:
            found.update(names_in(n.target))

        def visit_AsName(self, n: cst.AsName) -> None:
            found.update(names_in(n.name))

        def visit_ImportAlias(self, n: cst.ImportAlias) -> None:
            if n.asname is None:
                found.add(node_code(n.name).split(".")[0])

        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            found.add(n.name.value)

        def visit_ClassDef(self, n: cst.ClassDef) -> None:
            found.add(n.name.value)

    node.visit(V())
    return found


def calls_to(node: cst.CSTNode, name: str) -> list[cst.Call]:
    return [c for c in calls(node) if dotted(c.func) == name]


def kernel_param_for(kernel: cst.FunctionDef, call: cst.Call, arg: cst.Arg) -> str | None:
    """The kernel parameter a launch argument binds to (positional or keyword); None if unknown."""
    params = [p.name.value for p in kernel.params.params]
    if arg.keyword is not None:
        return arg.keyword.value if arg.keyword.value in params else None
    if arg.star:
        return None
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional[: positional.index(arg) + 1]):
        return None
    i = positional.index(arg)
    return params[i] if i < len(params) else None


def bound_once(fn: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """Names a function binds exactly once in its body, with a plain `name = value`, by name: the value. A name
    also bound any other way (another assignment, an augmented or annotated one, a loop or walrus target) is left
    out; parameters are not looked at."""
    counts: dict[str, int] = {}
    values: dict[str, cst.BaseExpression] = {}
    for node in nodes_under(fn.body, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr)):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            for name in names_in(target):
                counts[name] = counts.get(name, 0) + 1
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            values[node.targets[0].target.value] = node.value
    return {n: v for n, v in values.items() if counts.get(n) == 1}


def fresh_name(fn: cst.FunctionDef, names: Iterable[str]) -> str:
    """The first of `names` (an endless sequence of candidates) that the function does not use."""
    taken = names_in(fn)
    return next(n for n in names if n not in taken)


def imported_modules(tree: cst.Module) -> set[str]:
    """The top-level names `import x.y` statements bind (`triton`, `torch`); `import x.y as z` binds `z`, not `x`
    (a module with only `import triton.language as tl` has no `triton` for a rewrite to call)."""
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    names.update(
                        node_code(a.asname.name) if a.asname else node_code(a.name).split(".")[0] for a in small.names
                    )
    return names


def statement_code(stmt: cst.CSTNode) -> str:
    """Code of a statement without its leading comment lines."""
    if isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement):
        stmt = stmt.with_changes(leading_lines=())
    return node_code(stmt)


def with_leading(stmt: cst.CSTNode, lines) -> cst.CSTNode:
    return stmt.with_changes(leading_lines=tuple(lines))


# parsed programs a transform keeps (libcst's parse with positions and parents: 0.5-2 s for one of Liger's modules
# on this 2-core machine, the most of a site search); the anchors are immutable libcst nodes
FOUND_KEPT = 8


@functools.lru_cache(maxsize=FOUND_KEPT)
def parsed(source: str) -> Module:
    """One `Module` of `source` for every anchored family (its lookups and analyses shared with the parse, which
    `transform.wrapped` shares with the node families). A program that does not parse raises each time."""
    return Module(source)


def kept(owner: object, key: tuple, compute: Callable[[], Any]) -> Any:
    """`compute()` once per `key`, the last FOUND_KEPT results kept on `owner` (a transform), most recent last."""
    store = owner.__dict__.setdefault("_kept", OrderedDict())
    if key not in store:
        store[key] = compute()
        if len(store) > FOUND_KEPT:
            store.popitem(last=False)
    store.move_to_end(key)
    return store[key]


class AnchoredTransform(Transform):
    """Base for families matched on the whole module and rewritten at one anchor node."""

    keeps_found: ClassVar[bool] = True  # False: a family whose anchors lean on state its last parse left behind

    def expert_anchors(self, module: Module) -> list[tuple[cst.CSTNode, dict]]:
        raise NotImplementedError

    def plain_anchors(self, module: Module) -> list[tuple[cst.CSTNode, dict]]:
        raise NotImplementedError

    def simple(self, node: cst.CSTNode, params: dict) -> cst.CSTNode:
        raise NotImplementedError

    def optimized(self, node: cst.CSTNode, params: dict) -> cst.CSTNode:
        raise NotImplementedError

    def default_params(self) -> dict:
        return {}

    def _found(self, source: str, plain: bool):
        """The parsed program and its anchors, sorted in source order; the last FOUND_KEPT kept by this transform,
        as `sites` then `simplify`, or `optimize_sites` then `optimize`, parse the same program twice, and a proposer
        asks a transform for the same program once a skill."""
        if not self.keeps_found:
            return self._parse_and_anchor(source, plain)
        return kept(self, ("found", plain, source), lambda: self._parse_and_anchor(source, plain))

    def _parse_and_anchor(self, source: str, plain: bool):
        try:
            module = parsed(source)
            anchors = self.plain_anchors(module) if plain else self.expert_anchors(module)
        except (cst.ParserSyntaxError, RecursionError, ValueError, KeyError, IndexError, AttributeError, TypeError):
            return None, []  # odd code: no site
        anchors.sort(key=lambda a: (module.line(a[0]), module.positions[a[0]].start.column))
        return module, anchors

    def _sites(self, source: str, plain: bool) -> list[Site]:
        module, anchors = self._found(source, plain)
        sites = []
        for i, (node, params) in enumerate(anchors):
            try:
                after = (
                    self.optimized(node, {**self.default_params(), **params}) if plain else self.simple(node, params)
                )
            except (KeyError, ValueError, cst.ParserSyntaxError):
                after = node  # a preview needs parameters some families cannot guess
            where = (module.function_of(node), i, module.line(node))
            sites.append(Site(self.id, *where, *self.shown(module, node, after), dict(params)))
        return sites

    def shown(self, module: Module, node: cst.CSTNode, after: cst.CSTNode) -> tuple[str, str]:
        """A site's `before` and `after` as a site shows them: the anchor's code, rewritten or not."""
        return node_code(node), node_code(after)

    def _apply(self, source: str, site: Site, plain: bool, params: dict | None) -> str:
        module, anchors = self._found(source, plain)
        if site.index >= len(anchors):
            raise ValueError(f"{self.id}: no site {site.index} in this program")
        node, context = anchors[site.index]
        new = self.optimized(node, {**context, **params}) if plain else self.simple(node, context)
        return module.tree.deep_replace(node, new).code

    def sites(self, source: str) -> list[Site]:
        return self._sites(source, plain=False)

    def simplify(self, source: str, site: Site) -> str:
        return self._apply(source, site, plain=False, params=None)

    def optimize_sites(self, source: str) -> list[Site]:
        return self._sites(source, plain=True)

    def optimize(self, source: str, site: Site, params: dict) -> str:
        return self._apply(source, site, plain=True, params=params)


def leading_comments(stmt: cst.CSTNode) -> list[str]:
    """A statement's leading lines as text: the comment, or "" for a blank line (params must be source text)."""
    return [line.comment.value if line.comment is not None else "" for line in stmt.leading_lines]


def leading_lines(comments: list[str]) -> tuple[cst.EmptyLine, ...]:
    return tuple(cst.EmptyLine(indent=bool(c), comment=cst.Comment(c) if c else None) for c in comments)


def returns_in(node: cst.CSTNode) -> int:
    count = 0

    class V(cst.CSTVisitor):
        def visit_Return(self, _node: cst.Return) -> None:
            nonlocal count
            count += 1

    node.visit(V())
    return count


def _comma_text(comma) -> str:
    """A separator as text: "" (none), ", " (same line) or ",\\n" (a line break, whose indentation is copied from a
    neighbour when it is put back)."""
    if not isinstance(comma, cst.Comma):
        return ""
    if isinstance(comma.whitespace_after, cst.SimpleWhitespace) and isinstance(
        comma.whitespace_before, cst.SimpleWhitespace
    ):
        return comma.whitespace_before.value + "," + comma.whitespace_after.value
    return ",\n"


def _comma_node(text: str, items: list) -> cst.Comma | cst.MaybeSentinel:
    if not text:
        return cst.MaybeSentinel.DEFAULT
    if text == ",\n":
        for item in items:
            comma = item.comma
            if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
                return comma
        return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    before, after = text.split(",", 1)
    return cst.Comma(whitespace_before=cst.SimpleWhitespace(before), whitespace_after=cst.SimpleWhitespace(after))


def drop_item(items: list, i: int) -> tuple[list, str]:
    """Remove item i of a comma-separated list (parameters, arguments, dict entries), keeping the layout of the
    rest: the last item's separator passes to the new last item. Returns the list and what `insert_item` needs."""
    items = list(items)
    if i == len(items) - 1 and i > 0:
        kept = _comma_text(items[i - 1].comma)
        items[i - 1] = items[i - 1].with_changes(comma=items[i].comma)
    else:
        kept = _comma_text(items[i].comma)
    del items[i]
    return items, kept


def insert_item(items: list, i: int, item, kept: str) -> list:
    """Undo `drop_item`: put `item` back at position i."""
    items = list(items)
    if not 0 <= i <= len(items):
        raise ValueError(f"position {i} outside a list of {len(items)}")
    if i == len(items) and i > 0:
        item = item.with_changes(comma=items[i - 1].comma)
        items[i - 1] = items[i - 1].with_changes(comma=_comma_node(kept, items))
    else:
        item = item.with_changes(comma=_comma_node(kept, items))
    items.insert(i, item)
    return items


def replace_node(root: cst.CSTNode, old: cst.CSTNode, new) -> cst.CSTNode:
    """`root` with `old` (found by identity) replaced by a node, a FlattenSentinel or a RemovalSentinel."""
    return replace_nodes(root, {old: new})


def replace_nodes(root: cst.CSTNode, new: dict) -> cst.CSTNode:
    """`root` with each key of `new` (a node, found by identity) replaced by its value, in one pass."""
    by_id = {id(old): value for old, value in new.items()}

    class R(cst.CSTTransformer):
        def on_leave(self, original_node, updated_node):
            return by_id.get(id(original_node), updated_node)

    return root.visit(R())


def blocks(root: cst.CSTNode) -> list[cst.IndentedBlock]:
    return nodes_under(root, cst.IndentedBlock)
