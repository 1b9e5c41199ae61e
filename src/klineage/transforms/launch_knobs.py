"""Family 9: num_warps / num_stages at kernel launch sites.

Also holds helpers shared by the other launch- and kernel-scoped families (autotune_single_config,
grouped_ordering, pipelining, constexpr_flags, specialization): recognizing Triton kernels and their launches,
and adding/removing trailing keyword arguments of a call while keeping the call's own argument layout (so a
one-argument-per-line launch stays one-argument-per-line and round trips exactly)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from klineage.transform import NodeTransform, _Rewriter, dotted, register

# Decorators that make a function a Triton kernel (bare names cover `from triton import jit`).
KERNEL_DECORATORS = frozenset({"triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics"})

KNOBS = ("num_warps", "num_stages")


def decorator_name(decorator: cst.Decorator) -> str:
    expr = decorator.decorator
    return dotted(expr.func if isinstance(expr, cst.Call) else expr)


def is_kernel(fn: cst.FunctionDef) -> bool:
    return any(decorator_name(d) in KERNEL_DECORATORS for d in fn.decorators)


def is_autotuned(fn: cst.FunctionDef) -> bool:
    return any(decorator_name(d) in ("triton.autotune", "autotune") for d in fn.decorators)


def kernel_names(module: cst.Module) -> set[str]:
    """Module-level Triton kernels. Launches of kernels imported from elsewhere are not recognized: their
    decorators (autotune, defaults) are not visible here."""
    return {s.name.value for s in module.body if isinstance(s, cst.FunctionDef) and is_kernel(s)}


def launched_kernel(call: cst.Call, kernels: set[str]) -> str | None:
    """`kernel[grid](...)` -> "kernel" when `kernel` is one of `kernels`."""
    if isinstance(call.func, cst.Subscript):
        name = dotted(call.func.value)
        if name in kernels:
            return name
    return None


def _default_sep() -> cst.Comma:
    return cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))


def _tail(args) -> int:
    """Where keyword arguments are appended: before a trailing `**kwargs`, else at the end."""
    return len(args) - 1 if args and args[-1].star == "**" else len(args)


def append_kwargs(call: cst.Call, values: dict[str, str]) -> cst.Call:
    """Append keyword arguments (values as source text) in the call's own layout: the new arguments are separated
    like the call's last two arguments, and, at the end of the call, the last one inherits the old last argument's
    trailing comma and whitespace (a multi-line launch keeps its closing line). A trailing `**kwargs` stays last."""
    if not values:
        return call
    args = list(call.args)
    p = _tail(args)
    sep = args[p - 2].comma if p >= 2 and isinstance(args[p - 2].comma, cst.Comma) else _default_sep()
    empty = cst.SimpleWhitespace("")
    new = [
        cst.Arg(
            value=cst.parse_expression(code), keyword=cst.Name(name), equal=cst.AssignEqual(empty, empty), comma=sep
        )
        for name, code in values.items()
    ]
    if p < len(args):  # before `**kwargs`: the preceding argument already ends with a comma
        sep = args[p - 1].comma if p >= 1 and isinstance(args[p - 1].comma, cst.Comma) else sep
        new = [a.with_changes(comma=sep) for a in new]
    elif args:
        last = args[-1]
        new[-1] = new[-1].with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(comma=sep, whitespace_after_arg=empty)
    else:
        new[-1] = new[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args[:p] + new + args[p:])


def trailing_kwargs(call: cst.Call, names: set[str] | frozenset[str]) -> int:
    """How many of the call's last arguments (before a trailing `**kwargs`) are keywords in `names`; 0 when one of
    the names also occurs earlier."""
    args = call.args
    p = k = _tail(args)
    while k > 0 and args[k - 1].keyword is not None and args[k - 1].keyword.value in names:
        k -= 1
    if any(a.keyword is not None and a.keyword.value in names for a in args[:k]):
        return 0
    return p - k


def drop_trailing(call: cst.Call, count: int) -> cst.Call:
    """Remove the `count` arguments before the tail (the inverse of `append_kwargs`); at the end of the call, the
    new last argument takes over the removed one's trailing comma and whitespace."""
    args = list(call.args)
    p = _tail(args)
    keep, tail, rest = args[: p - count], args[p - count : p], args[p:]
    if keep and tail and not rest:
        keep[-1] = keep[-1].with_changes(comma=tail[-1].comma, whitespace_after_arg=tail[-1].whitespace_after_arg)
    return call.with_changes(args=keep + rest)


class _ScopedRewriter(_Rewriter):
    """_Rewriter that also tells its transform whether the node being matched sits inside a Triton kernel."""

    def __init__(self, owner: ScopedNodeTransform, *args):
        super().__init__(*args)
        self.owner = owner

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self.owner._scope.append(is_kernel(node))

    def leave_FunctionDef(self, original_node, updated_node):
        self.owner._scope.pop()
        return super().leave_FunctionDef(original_node, updated_node)


class ScopedNodeTransform(NodeTransform):
    """NodeTransform whose match functions may ask `self.in_kernel()` and read `self.kernels` (module-level
    kernel names). Source that does not parse has no sites."""

    kernels: set[str]
    autotuned: set[str]
    _scope: list[bool]

    def in_kernel(self) -> bool:
        return bool(self._scope) and self._scope[-1]

    def _scoped_run(self, source, match, rewrite, target):
        module = cst.parse_module(source)
        self.kernels, self._scope = kernel_names(module), []
        self.autotuned = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef) and is_autotuned(s)}
        rewriter = _ScopedRewriter(self, self.node_type, match, rewrite, target, self.id)
        out = MetadataWrapper(module).visit(rewriter)
        return out.code, rewriter.found

    def sites(self, source):
        try:
            return self._scoped_run(source, self.expert, self.simple, None)[1]
        except cst.ParserSyntaxError:
            return []

    def simplify(self, source, site):
        return self._scoped_run(source, self.expert, self.simple, site.index)[0]

    def optimize_sites(self, source):
        try:
            return self._scoped_run(source, self.plain, self._optimized_default, None)[1]
        except cst.ParserSyntaxError:
            return []

    def optimize(self, source, site, params):
        return self._scoped_run(source, self.plain, lambda n, ctx: self.optimized(n, {**ctx, **params}), site.index)[0]


@register
class LaunchKnobs(ScopedNodeTransform):
    """Intent: the launch picks the warp count (and pipeline depth) for its tile: more warps for wide rows keep
    the values per thread, hence registers, bounded; more stages overlap loads with compute.

    Expert form: `kernel[grid](..., num_warps=8, num_stages=3)`, the knobs being the trailing keyword
    arguments of a launch of a kernel defined in the same source. Simple form: the same launch without them
    (Triton's defaults: 4 warps, the backend's default number of stages). Params record the expert's values as
    source text, which may be an expression (`num_warps=_num_warps(BLOCK)`); optimize appends them again.
    A trailing `**kwargs` may follow the knobs. Launches where a knob is followed by other arguments, launches of
    imported kernels and of autotuned ones (their configs own the knobs) are skipped.

    Conditions: num_stages x the loop's tile bytes must fit in shared memory (shared_memory_fits); the warp
    count must be a power of 2 no larger than 32 (the expert's choice always is; a given param must be too).

    Failure: too many stages for the tile fail to compile ("out of resources: shared memory"); the
    default of 4 warps on a very wide row spills registers (slow, not wrong). Removing the knobs never changes
    results."""

    id = "launch_knobs"
    family = 9
    tag = "M"
    cost = 2
    conditions = ("shared_memory_fits",)
    intent = "launch with the warp count and pipeline depth suited to the tile instead of the defaults"

    def expert(self, node):
        if launched_kernel(node, self.kernels - self.autotuned) is None:
            return None
        n, p = trailing_kwargs(node, frozenset(KNOBS)), _tail(node.args)
        if n == 0 or n == p:  # no positional/keyword argument left before the knobs: skip
            return None
        return {a.keyword.value: cst.Module([]).code_for_node(a.value) for a in node.args[p - n : p]}

    def simple(self, node, params):
        return drop_trailing(node, trailing_kwargs(node, frozenset(KNOBS)))

    def plain(self, node):
        if launched_kernel(node, self.kernels - self.autotuned) is None or not node.args:
            return None
        if any(a.keyword is not None and a.keyword.value in KNOBS for a in node.args):
            return None
        return {}

    def optimized(self, node, params):
        values = {k: v for k, v in params.items() if k in KNOBS}
        if not values:
            raise KeyError("num_warps")
        return append_kwargs(node, values)

    def default_params(self):
        return {"num_warps": "8"}
