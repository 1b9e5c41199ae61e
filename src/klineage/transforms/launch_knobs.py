"""Family 9: num_warps / num_stages at kernel launch sites.

Also holds helpers shared by the other launch- and kernel-scoped families (autotune_single_config,
grouped_ordering, pipelining, constexpr_flags, specialization): a node transform that knows whether it sits
inside a Triton kernel (recognizing kernels and their launches lives in klineage.transform), and adding/removing
trailing keyword arguments of a call while keeping the call's own argument layout (so a one-argument-per-line
launch stays one-argument-per-line and round trips exactly)."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from klineage import launch_config
from klineage.carry import literal_int
from klineage.transform import (
    WARPS_AND_STAGES,
    NodeRewriter,
    NodeTransform,
    is_autotuned,
    is_kernel,
    kernel_names,
    launched_kernel,
    register,
    wrapped,
)
from klineage.transforms._anchored import kept

KNOBS = ("num_warps", "num_stages")


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


class _ScopedRewriter(NodeRewriter):
    """NodeRewriter that also tells its transform whether the node being matched sits inside a Triton kernel."""

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
        wrapper = wrapped(source)
        module = wrapper.module
        self.kernels, self._scope = kernel_names(module), []
        self.autotuned = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef) and is_autotuned(s)}
        rewriter = _ScopedRewriter(self, self.node_type, match, rewrite, target, self.id)
        out = wrapper.visit(rewriter)
        return out.code, rewriter.found

    def _kept_sites(self, kind: str, source: str, find) -> list:
        """The sites of `source` found once and kept (_anchored.kept): a proposer asks for them once a skill; copies
        are handed out, so no caller changes what the next one reads."""

        def found() -> list:
            try:
                return find()
            except cst.ParserSyntaxError:
                return []

        return [replace(site, params=dict(site.params)) for site in kept(self, ("sites", kind, source), found)]

    def sites(self, source):
        return self._kept_sites("expert", source, lambda: self._scoped_run(source, self.expert, self.simple, None)[1])

    def simplify(self, source, site):
        return self._scoped_run(source, self.expert, self.simple, site.index)[0]

    def optimize_sites(self, source):
        return self._kept_sites(
            "plain", source, lambda: self._scoped_run(source, self.plain, self._optimized_default, None)[1]
        )

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
    forward_rank = 1
    launch_configuration = WARPS_AND_STAGES
    needs_timing = True
    tuned_to_kernel = True
    sets_launch_knobs = True
    interpreter_blind = "the interpreter has no warps or pipeline stages"

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

    def variants(self, carried: dict, source: str, kernel: str | None, launches: list[dict] | None) -> list[dict]:
        """The neighbourhood, with carried warps adapted to the launch's tile (`warps_for_tile`)."""
        variants = super().variants(carried, source, kernel, launches)
        return variants if kernel is None else warps_for_tile(variants, source, kernel, launches)

    def variant_expected(self, expected: float, params: dict, carried: dict, source: str, kernel: str | None) -> float:
        """For warps turned the other way from the carried ones (`warps_for_tile`), none: the skill measured more
        warps."""
        if params != carried and kernel is not None:
            warps, asked = literal_int(params.get("num_warps")), literal_int((carried or {}).get("num_warps"))
            if warps is not None:
                present = launch_config.present_warps(source, kernel)
                if warps < present and (asked is None or asked > present):
                    return 1.0
        return super().variant_expected(expected, params, carried, source, kernel)


def warps_for_tile(variants: list[dict], source: str, kernel: str, launches: list[dict] | None = None) -> list[dict]:
    """Carried warps adapted to this launch's tile: at most the warps that leave each thread
    MIN_ELEMENTS_PER_THREAD of the elements one program handles (an expert's 8 or 16 warps were measured on rows
    of thousands of elements; on a 256-element block they idle). A variant the tile has no room for (its warps
    capped at or below the present ones: a reduction nobody measured) is dropped, as are variants that end at the
    launch's present warps or repeat one another: they would spend an evaluation on the same program. A computed
    tile (`next_power_of_2(n)`) has its size from the bench case's launches (`launches`), where the check saw them;
    without them it is not capped. RoPE's 64-wide half per program took SwiGLU's 8 warps (expected x1.16) first and
    ran at x0.50, and the rows-per-program twin, x5.9 for blind, never got its turn in four evaluations (H200,
    RESULTS.md#run-19).
    Where a computed tile has no room for more warps than the present ones, the carried variant becomes half the
    present warps (one step; the next round steps again from there): such a tile is the row or the head, which no
    launch parameter enlarges, so fewer threads are the one way to give each more of it. Measured: on RoPE (64
    elements a program) and the masked softmax (1024 fp16 elements) the autotune baseline's 2 warps ran at x1.234
    and x1.068, and 1 warp after them at x1.000 and x1.140, where the cap had left KLineage no warps at all (H200,
    RESULTS.md#run-20). A literal tile keeps the drop: the launch-configuration search enlarges it instead.
    Fewer warps than the present ones that would leave each thread more than MAX_ELEMENTS_PER_THREAD of the tile are
    dropped as well: registers, not parallelism, bound such a kernel."""
    elements = launch_config.elements_per_program(source, kernel)
    computed = elements is None
    if computed:
        elements = launch_config.launched_elements(source, kernel, launches)
    cap = floor = None
    if elements is not None:
        room = elements // (32 * launch_config.MIN_ELEMENTS_PER_THREAD)
        cap = 1 << (room.bit_length() - 1) if room else 0  # a power of two
        floor = -(-elements // (32 * launch_config.MAX_ELEMENTS_PER_THREAD))
    present = launch_config.present_warps(source, kernel)
    out = []
    for params in variants:
        warps = literal_int(params.get("num_warps"))
        if warps is not None and cap is not None and warps > cap:
            if cap > present:
                params = {**params, "num_warps": str(cap)}
            elif computed and present >= 2:
                params = {**params, "num_warps": str(present // 2)}
            else:
                continue
        warps = literal_int(params.get("num_warps"))  # as capped
        if warps == present and len(params) == 1:
            continue
        if warps is not None and floor is not None and warps < min(present, floor):
            continue
        if params not in out:
            out.append(params)
    return out
