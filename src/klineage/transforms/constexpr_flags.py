"""Family 28: constexpr feature flags (`HAS_WEIGHT: tl.constexpr` used only in `if HAS_WEIGHT:`)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from klineage.transform import Site, Transform, dotted, is_kernel, node_code, register

CONSTEXPR = ("tl.constexpr", "triton.language.constexpr", "constexpr")


def _flag_test(test: cst.BaseExpression) -> cst.Name | None:
    """`FLAG` or `not FLAG` -> the Name."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test = test.expression
    return test if isinstance(test, cst.Name) else None


class _Collect(cst.CSTVisitor):
    """Every Name, the Ifs tested on a bare flag, stored names, and whether a `return` occurs."""

    def __init__(self):
        super().__init__()
        self.names: list[cst.Name] = []
        self.tests: dict[str, list[tuple[cst.If, cst.Name]]] = {}
        self.stored: set[str] = set()
        self.rebound: set[str] = set()  # stored other than by an augmented assignment
        self.returns = False

    def visit_Name(self, node):
        self.names.append(node)

    def visit_If(self, node):
        name = _flag_test(node.test)
        if name is not None:
            self.tests.setdefault(name.value, []).append((node, name))

    def visit_Return(self, node):
        self.returns = True

    def _store(self, target, aug: bool = False):
        if isinstance(target, cst.Name):
            self.stored.add(target.value)
            if not aug:
                self.rebound.add(target.value)
        elif isinstance(target, cst.Tuple | cst.List):
            for e in target.elements:
                self._store(e.value)
        elif isinstance(target, cst.StarredElement):
            self._store(target.value)

    def visit_AssignTarget(self, node):
        self._store(node.target)

    def visit_AugAssign(self, node):
        self._store(node.target, aug=True)

    def visit_AnnAssign(self, node):
        self._store(node.target)

    def visit_For(self, node):
        self._store(node.target)

    def visit_NamedExpr(self, node):
        self._store(node.target)


def _collect(node: cst.CSTNode) -> _Collect:
    c = _Collect()
    node.visit(c)
    return c


def _flag_ifs(fn: cst.FunctionDef, name: str, body: _Collect) -> list[cst.If] | None:
    """The Ifs that `name` guards, when every use of `name` in the kernel is such a test; else None."""
    tests = body.tests.get(name, [])
    uses = [n for n in body.names if n.value == name]
    if not tests or len(uses) != len(tests) or {id(n) for _, n in tests} != {id(n) for n in uses}:
        return None
    return [i for i, _ in tests]


def _runtime_safe(fn: cst.FunctionDef, ifs: list[cst.If], body: _Collect, positions, parents) -> bool:
    """A runtime `if` (scf.if) only exports names that exist before it, with the type they had: every name a
    guarded branch assigns and the kernel reads later (after the if, or anywhere in a loop around it) must exist
    before the if, and the branch may only update it in place (`acc += ..`, `ptr += ..`), not rebind it
    (`x = x.to(tl.float32)` changes its type). A `return` inside a guarded branch is rejected too (Triton only
    lowers it at the top level)."""
    params = {p.name.value for p in fn.params.params} | {p.name.value for p in fn.params.kwonly_params}
    for branch in ifs:
        inner = _collect(branch)
        if inner.returns:
            return False
        start, end = positions[branch].start.line, positions[branch].end.line
        inside = {id(n) for n in inner.names}
        loops = []
        node = parents.get(branch)
        while node is not None and node is not fn:
            if isinstance(node, cst.For | cst.While):
                loops.append((positions[node].start.line, positions[node].end.line))
            node = parents.get(node)
        for name in inner.stored:
            outside = [n for n in body.names if n.value == name and id(n) not in inside]
            lines = [positions[n].start.line for n in outside]
            read_later = any(ln > end or any(a <= ln <= b for a, b in loops) for ln in lines)
            defined_before = name in params or any(ln < start for ln in lines)
            if read_later and (not defined_before or name in inner.rebound):
                return False
    return True


def _find(source: str, annotated: bool):
    """(FunctionDef, Param, params) for each flag: annotated constexpr flags (expert) or unannotated parameters
    used only as if-tests (simple), in source order."""
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    found = []
    for stmt in module.body:
        if not isinstance(stmt, cst.FunctionDef) or not is_kernel(stmt):
            continue
        body = _collect(stmt.body)
        for param in [*stmt.params.params, *stmt.params.kwonly_params]:
            ann = param.annotation
            if annotated != (ann is not None) or (ann is not None and dotted(ann.annotation) not in CONSTEXPR):
                continue
            ifs = _flag_ifs(stmt, param.name.value, body)
            if ifs is None:
                continue
            if annotated and not _runtime_safe(stmt, ifs, body, positions, parents):
                continue
            params = {"annotation": node_code(ann.annotation)} if ann is not None else {}
            found.append((stmt, param, params, positions[param].start.line))
    return module, found


@register
class ConstexprFlags(Transform):
    """Intent: a feature flag declared `tl.constexpr` is folded at compile time, so the `if FLAG:` blocks that it
    gates vanish from the specialization that does not need them (Liger: "so the `if` blocks can be optimized
    out"): no branch, no dead loads, fewer registers.

    Expert form: a kernel parameter annotated `: tl.constexpr` whose every use is the test of an `if FLAG:` or
    `if not FLAG:` (a feature flag; not a block size used in tl.arange or shapes, not compared to strings).
    Simple form: the same parameter without the annotation: a runtime scalar and a runtime branch. Params: the
    annotation as source text. Simplify is offered only where the runtime branch still compiles by form: no
    `return` inside a guarded branch, and every name a guarded branch assigns and the kernel reads later already
    exists before the if and is only updated in place there (`acc += ..`). So the Liger
    `if HAS_W: w = tl.load(..)` ... `if HAS_W: x *= w` pattern and `if CAST: x = x.to(tl.float32)` are skipped.

    Conditions: flag_not_shape: the flag must not shape tensors or select types, which the use check guarantees by
    form; what it
    cannot see is an in-place update in a guarded branch that changes a variable's dtype or shape (a runtime if
    must yield the same type on both sides), e.g. `acc += block` on a scalar acc, or `acc += x` promoting with
    the input dtype. So the probes run the low-precision dtypes too (dtype_fp16, dtype_bf16): a dtype-changing
    branch fails to compile for some of them only.

    Failure: a runtime if whose branches disagree on a variable's type fails to compile ("Mismatched type"),
    and a name defined only in a runtime branch is undefined after it (compile error). Passing a non-constant
    (a tensor) for a constexpr flag fails at launch. Otherwise both forms compute the same results; the
    runtime flag costs a branch and keeps both paths' registers."""

    id = "constexpr_flags"
    family = 28
    tag = "M"
    cost = 3
    conditions = ("flag_not_shape", "dtype_fp16", "dtype_bf16")
    intent = "make a feature flag a compile-time constant so the branches it gates are folded away"
    forward_rank = 4

    def sites(self, source: str) -> list[Site]:
        try:
            _, found = _find(source, True)
        except cst.ParserSyntaxError:
            return []
        return [
            Site(
                self.id,
                fn.name.value,
                i,
                line,
                node_code(p).rstrip(","),
                node_code(p.with_changes(annotation=None)).rstrip(","),
                params,
            )
            for i, (fn, p, params, line) in enumerate(found)
        ]

    def simplify(self, source: str, site: Site) -> str:
        module, found = _find(source, True)
        _, param, _, _ = found[site.index]
        return module.deep_replace(param, param.with_changes(annotation=None)).code

    def optimize_sites(self, source: str) -> list[Site]:
        try:
            _, found = _find(source, False)
        except cst.ParserSyntaxError:
            return []
        out = []
        for i, (fn, p, params, line) in enumerate(found):
            after = node_code(self._annotate(p, "tl.constexpr")).rstrip(",")
            out.append(Site(self.id, fn.name.value, i, line, node_code(p).rstrip(","), after, params))
        return out

    def optimize(self, source: str, site: Site, params: dict) -> str:
        module, found = _find(source, False)
        _, param, _, _ = found[site.index]
        annotated = self._annotate(param, params.get("annotation", "tl.constexpr"))
        return module.deep_replace(param, annotated).code

    @staticmethod
    def _annotate(param: cst.Param, annotation: str) -> cst.Param:
        return param.with_changes(
            annotation=cst.Annotation(
                cst.parse_expression(annotation), whitespace_before_indicator=cst.SimpleWhitespace("")
            )
        )
