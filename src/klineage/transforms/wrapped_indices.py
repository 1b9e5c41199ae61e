"""Family 3: wrap indices (offs % M) instead of masking the loads."""

from __future__ import annotations

import libcst as cst

from klineage import launch_config
from klineage.transform import Site, broadcasts, kwarg, node_code, register, with_kwargs, without_kwargs
from klineage.transforms._anchored import AnchoredTransform, Module, calls_to, is_jit, names_in


def _assignments(fn: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """Name -> the values assigned to it in the function (plain and augmented assignments)."""
    found: dict[str, list] = {}

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if isinstance(t.target, cst.Name):
                    found.setdefault(t.target.value, []).append(node.value)
                else:
                    for n in names_in(t.target):
                        found.setdefault(n, []).append(None)  # tuple targets: unknown value

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                found.setdefault(node.target.value, []).append(node.value)

    fn.visit(V())
    return found


def _modulos(expr: cst.CSTNode) -> list[cst.BinaryOperation]:
    found: list[cst.BinaryOperation] = []

    class V(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Modulo):
                found.append(node)

    expr.visit(V())
    return found


def _is_tile_start_plus_arange(expr: cst.CSTNode) -> bool:
    """`start + tl.arange(0, B)` (either order): a tile's row or column offsets."""
    if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.Add):
        return False
    sides = (expr.left, expr.right)
    return any(isinstance(e, cst.Call) and e.func is not None and calls_to(e, "tl.arange") == [e] for e in sides)


def _has_arange(expr: cst.CSTNode, assigned: dict) -> bool:
    """`expr` is tile offsets `start + tl.arange(...)`, directly or through a name only ever assigned such."""
    if _is_tile_start_plus_arange(expr):
        return True
    if isinstance(expr, cst.Name):
        values = assigned.get(expr.value, [])
        return bool(values) and all(v is not None and _is_tile_start_plus_arange(v) for v in values)
    return False


def _contains_tile(expr: cst.CSTNode, assigned: dict) -> bool:
    """Some sub-expression of `expr` is tile offsets (the value may wrap them in hints like tl.multiple_of)."""
    found = False

    class V(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if isinstance(node, cst.BaseExpression) and _has_arange(node, assigned):
                found = True
            return not found

    expr.visit(V())
    return found


def _pointer_exprs(load: cst.Call, assigned: dict) -> list[cst.CSTNode]:
    """The pointer argument of a load and the values of the pointer variables it names."""
    if not load.args or load.args[0].keyword is not None:
        return []
    ptr = load.args[0].value
    exprs = [ptr]
    for n in names_in(ptr):
        exprs += [v for v in assigned.get(n, []) if v is not None]
    return exprs


def _indexed(var: str, exprs: list[cst.CSTNode]) -> str | None:
    """How a pointer expression indexes `var`: `var[:, None]` (its code), `var` when used whole, None if not used."""
    hits: list[str] = []

    class V(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> bool:
            if isinstance(node.value, cst.Name) and node.value.value == var:
                hits.append(node_code(node))
                return False
            return True

    for expr in exprs:
        expr.visit(V())
        if hits:
            return hits[0]
        if var in names_in(expr):
            return var
    return None


def _mask_term(index: str, bound: str) -> cst.BaseExpression:
    return cst.parse_expression(f"{index} < {bound}")


def _is_term(expr: cst.BaseExpression, var: str, bound: str) -> bool:
    if expr.lpar:
        expr = expr.with_changes(lpar=[], rpar=[])
    if not isinstance(expr, cst.Comparison) or len(expr.comparisons) != 1:
        return False
    target = expr.comparisons[0]
    left = expr.left.value if isinstance(expr.left, cst.Subscript) else expr.left
    return (
        isinstance(target.operator, cst.LessThan)
        and isinstance(left, cst.Name)
        and left.value == var
        and isinstance(target.comparator, cst.Name)
        and target.comparator.value == bound
    )


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


class _Kernel:
    """What the family needs to know about one kernel."""

    def __init__(self, fn: cst.FunctionDef):
        self.fn = fn
        self.assigned = _assignments(fn)
        self.loads = calls_to(fn, "tl.load")
        stores = calls_to(fn, "tl.store")
        self.stored = set().union(*(names_in(e) for s in stores for e in _pointer_exprs(s, self.assigned)))

    def offset_var(self, var: str) -> cst.BaseExpression | None:
        """The single value of an offset variable that no store addresses with, else None."""
        values = self.assigned.get(var, [])
        if len(values) != 1 or values[0] is None or var in self.stored:
            return None
        return values[0]

    def loads_of(self, var: str) -> list[tuple[cst.Call, str]]:
        found = []
        for load in self.loads:
            index = _indexed(var, _pointer_exprs(load, self.assigned))
            if index is not None:
                found.append((load, index))
        return found


REDUCTIONS = (
    "tl.sum(",
    "tl.max(",
    "tl.min(",
    "tl.argmax(",
    "tl.argmin(",
    "tl.cumsum(",
    "tl.cumprod(",
    "tl.reduce(",
    "tl.associative_scan(",
    "tl.atomic_",
)


def reduces_1d(source: str, kernel: str) -> str | None:
    """The reduction a 1-D kernel (no broadcast indexing) applies to its lanes, if any: there, lanes a wrap
    duplicates are summed, maxed or atomically added twice, while in a 2-D GEMM the wrapped rows are independent."""
    body = launch_config.kernel_code(source, kernel)
    if broadcasts(body):
        return None
    return next((op.rstrip("(") for op in REDUCTIONS if op in body), None)


@register
class WrappedIndices(AnchoredTransform):
    """Intent: wrap tile offsets (`offs_am = (pid_m * BM + tl.arange(0, BM)) % M`) so the A/B loads of a tile
    that overhangs M or N re-read valid rows instead of being masked: no predication in the hot loop, and the
    offsets keep the contiguity the alignment hints claim (TT 03 matmul, triton.ops matmul, vLLM fused_moe).

    Conditions: each output row (column) depends only on its own input row (column), as in a GEMM, so the rows
    the wrap duplicates only produce values that the masked store discards; the store keeps its own mask on the
    unwrapped offsets. Probing `divisible_by_block` separates shapes where the wrap never fires from those where
    it does.

    Failure: where rows of a tile are reduced together (a row-sum, a norm, a reduction over M), the wrapped rows
    are real rows read a second time and are double-counted. If the store used the wrapped offsets, the
    overhanging rows would overwrite valid rows with wrong values; dropping the store mask as well writes out of
    bounds. The simplified kernel (raw offsets, masked loads with other=0) is correct everywhere.

    Sites: a @triton.jit function with offset variables assigned once from an expression holding `x % B` (B a
    name, x built from tl.arange), used in the pointers of tl.load and in no tl.store pointer. Simplify: drop
    the `% B` and mask every load through that variable with `var[<its indexing>] < B` (and-ed in front of an
    existing mask; other=0.0 when the load had none). Params: `wrapped` ({var: {"bound", "value"}}) and
    `loads` (per affected load: whether other= and parentheses were added). Optimize: a kernel whose load masks
    hold `var[...] < B` terms for such offset variables; puts the wrap back, by default `(value) % B`."""

    id = "wrapped_indices"
    family = 3
    tag = "S"
    cost = 3
    conditions = ("divisible_by_block",)
    intent = "wrap out-of-range offsets instead of masking the loads"
    forward_rank = 3

    def misfit(self, expert: dict, source: str, site: Site, kernel: str | None) -> tuple[str, str] | None:
        """Refused in a kernel that reduces its lanes: there a wrapped lane counts twice."""
        if kernel is None or (op := reduces_1d(source, kernel)) is None:
            return None
        return (
            "divisible_by_block",
            f"the kernel reduces its lanes ({op}): a wrapped lane would count twice wherever a size is not a "
            "multiple of the block; a GEMM's rows and columns are independent, these are not",
        )

    def expert_anchors(self, module: Module):
        found = []
        for fn in module.functions():
            if not is_jit(fn):
                continue
            k = _Kernel(fn)
            wrapped = {}
            for var in k.assigned:
                value = k.offset_var(var)
                mods = _modulos(value) if value is not None else []
                if len(mods) != 1 or not isinstance(mods[0].right, cst.Name) or not k.loads_of(var):
                    continue
                if not _has_arange(mods[0].left, k.assigned):
                    continue
                wrapped[var] = {"bound": mods[0].right.value, "value": node_code(value)}
            if wrapped:
                loads = []
                for load in k.loads:
                    if any(_indexed(v, _pointer_exprs(load, k.assigned)) is not None for v in wrapped):
                        mask = kwarg(load, "mask")
                        paren = mask is not None and not _bare(mask.value)
                        loads.append({"other": kwarg(load, "other") is None, "paren": paren})
                found.append((fn, {"wrapped": wrapped, "loads": loads}))
        return found

    def simple(self, node, params):
        k = _Kernel(node)
        wrapped = params["wrapped"]
        terms: dict[int, list] = {}  # id(load) -> mask terms, in variable order
        for var, info in wrapped.items():
            for load, index in k.loads_of(var):
                terms.setdefault(id(load), []).append(_mask_term(index, info["bound"]))
        values = {id(k.offset_var(var)): var for var in wrapped}

        class R(cst.CSTTransformer):
            def on_leave(self, original, updated):
                if id(original) in values and isinstance(original, cst.BaseExpression):
                    return _unwrap(updated)
                if isinstance(original, cst.Call) and id(original) in terms:
                    return _mask_load(updated, terms[id(original)])
                return updated

        return node.visit(R())

    def plain_anchors(self, module: Module):
        found = []
        for fn in module.functions():
            if not is_jit(fn):
                continue
            k = _Kernel(fn)
            candidates = {}
            for load in k.loads:
                mask = kwarg(load, "mask")
                for term in _and_terms(mask.value) if mask is not None else []:
                    for var in names_in(term):
                        value = k.offset_var(var)
                        if value is None or _modulos(value) or not _contains_tile(value, k.assigned):
                            continue
                        params = {p.name.value for p in fn.params.params}
                        for bound in (names_in(term) - {var}) & params:
                            if _is_term(term, var, bound):
                                candidates[var] = bound
            if candidates:
                found.append((fn, {"candidates": candidates}))
        return found

    def default_params(self) -> dict:
        return {}

    def optimized(self, node, params):
        k = _Kernel(node)
        wrapped = params.get("wrapped")
        if wrapped is None:  # default: wrap every candidate
            wrapped = {
                v: {"bound": b, "value": f"({node_code(k.offset_var(v))}) % {b}"}
                for v, b in params["candidates"].items()
            }
        affected = [
            load for load in k.loads if any(_indexed(v, _pointer_exprs(load, k.assigned)) is not None for v in wrapped)
        ]
        info = dict(zip(map(id, affected), params.get("loads", [{"other": True, "paren": True}] * len(affected))))
        values = {}
        for var, w in wrapped.items():
            value = k.offset_var(var)
            if value is None:
                raise ValueError(f"wrapped_indices: {var} is not a single-assignment offset here")
            values[id(value)] = cst.parse_expression(w["value"])

        class R(cst.CSTTransformer):
            def on_leave(self, original, updated):
                if id(original) in values and isinstance(original, cst.BaseExpression):
                    return values[id(original)]
                if isinstance(original, cst.Call) and id(original) in info:
                    return _unmask_load(updated, wrapped, info[id(original)])
                return updated

        return node.visit(R())


def _unwrap(value: cst.BaseExpression) -> cst.BaseExpression:
    """`value` without its one `x % B`: the modulo node becomes x."""
    (mod,) = _modulos(value)
    left = mod.left
    if mod is value:  # the whole right-hand side: grouping parentheses of x are no longer needed
        return left.with_changes(lpar=[], rpar=[]) if isinstance(left, cst.BinaryOperation) else left
    if mod.lpar:
        left = left.with_changes(lpar=mod.lpar, rpar=mod.rpar) if not left.lpar else left
    return value.deep_replace(mod, left)


def _mask_load(load: cst.Call, terms: list) -> cst.Call:
    mask = kwarg(load, "mask")
    if mask is None:
        expr = terms[0]
        for t in terms[1:]:
            expr = cst.BinaryOperation(_parenthesized(expr), cst.BitAnd(), _parenthesized(t))
        values = {"mask": node_code(expr)}
        if kwarg(load, "other") is None:
            values["other"] = "0.0"
        return with_kwargs(load, values)
    old = mask.value
    rest = old if _bare(old) else _parenthesized(old)
    expr = rest
    for t in reversed(terms):
        expr = cst.BinaryOperation(_parenthesized(t), cst.BitAnd(), expr)
    return load.with_changes(args=[a.with_changes(value=expr) if a is mask else a for a in load.args])


def _bare(expr: cst.BaseExpression) -> bool:
    """Safe as an operand of `&` without parentheses."""
    return bool(expr.lpar) or isinstance(expr, cst.Name | cst.Subscript | cst.Call | cst.Attribute)


def _and_terms(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitAnd) and not expr.lpar:
        return _and_terms(expr.left) + _and_terms(expr.right)
    return [expr]


def _unmask_load(load: cst.Call, wrapped: dict, info: dict) -> cst.Call:
    mask = kwarg(load, "mask")
    if mask is None:
        return load
    terms = _and_terms(mask.value)
    kept = [t for t in terms if not any(_is_term(t, v, w["bound"]) for v, w in wrapped.items())]
    if not kept:  # no mask left: `other` goes too, whatever the expert's loads did (Triton rejects other without mask)
        return without_kwargs(load, {"mask", "other"})
    if len(kept) == 1:
        rest = kept[0]
        if info.get("paren") and rest.lpar:
            rest = rest.with_changes(lpar=[], rpar=[])
    else:
        rest = kept[0]
        for t in kept[1:]:
            rest = cst.BinaryOperation(rest, cst.BitAnd(), t)
    return load.with_changes(args=[a.with_changes(value=rest) if a is mask else a for a in load.args])
