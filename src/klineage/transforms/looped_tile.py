"""Family 8, the other way: a dimension held whole in one tile, swept in capped tiles where the tile would not fit.

A straight-line kernel that holds a whole dimension in one tile (`offs = tl.arange(0, BLOCK)`, launched with
`BLOCK=triton.next_power_of_2(n)`) reads it once, and that is the family's point while the tile fits in registers.
Past that it spills: FlagGems's group norm holds a whole group, 32 channels x 4096 = 131072 fp32 values, in one
tile at 4 warps, compiled for sm_90 it spills 19848 bytes a thread, and on an H100 it ran x4.6 behind torch.compile
of the same op (`benchmarks/static_spills.py`, RESULTS.md#wild-headroom). The catalog's capped side of family 8
("an oversized BLOCK spills registers") is a loop over the dimension in tiles of a bounded size.

This family writes that loop as a twin of the kernel, launched where the whole tile would hold more than
PER_THREAD values a thread, the original launched where it would not. Each reduction over the split dimension
(`tl.sum`, `tl.max`, `tl.min`) becomes a pass that accumulates it tile by tile (its first tile peeled, so the
accumulator has the reduction's own type and shape); what depends on a reduced value moves to a later pass, which
loads its inputs again; the stores run in the last pass. Group norm becomes three passes (the mean, the variance,
the normalized store): the group read three times instead of once, none of it spilled.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from klineage import launch_config
from klineage.transform import constexpr_params, dotted, is_autotuned, kwarg, node_code, register
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    assignment,
    bound_once,
    imported_modules,
    launch_statement,
    launches,
    name_uses,
    names_in,
    replace_nodes,
)

TWIN = "_looped"
# Values of one tile-wide value a thread may hold: Liger's cross-entropy cap, 65536 // 2 elements at 32 warps, "less
# register spilling" (catalog family 8). The dispatch keeps the one-tile kernel up to 32 x 32 x warps elements.
PER_THREAD = 32
# The swept tile's values a thread (the `per_thread` parameter's default): 8, 1024 elements at 4 warps, the moderate
# tile of block_cap_dispatch. Group norm's looped twin compiled for sm_90 at 4 warps: 126 registers, no spill, with
# 8; 255 registers with 32 (benchmarks/static_spills.py, this CPU).
SWEPT_PER_THREAD = 8
DEFAULT_WARPS = 4  # Triton's, where a launch passes none
REDUCTIONS = {"tl.sum": None, "tl.max": "tl.maximum", "tl.min": "tl.minimum"}  # with how partials combine
# calls that see a tile's extent or order along the split dimension: a kernel using any is left alone
SHAPED = (
    "tl.argmax", "tl.argmin", "tl.reduce", "tl.cumsum", "tl.cumprod", "tl.associative_scan", "tl.sort", "tl.flip",
    "tl.histogram", "tl.dot", "tl.dot_scaled", "tl.reshape", "tl.view", "tl.trans", "tl.permute", "tl.broadcast_to",
    "tl.expand_dims", "tl.join", "tl.split", "tl.interleave", "tl.gather", "tl.make_block_ptr", "tl.advance",
    "tl.make_tensor_descriptor", "tl.atomic_add", "tl.atomic_max", "tl.atomic_min", "tl.atomic_cas", "tl.atomic_xchg",
    "tl.atomic_and", "tl.atomic_or", "tl.atomic_xor", "tl.inline_asm_elementwise", "tl.debug_barrier",
    "tl.device_print", "tl.static_print", "tl.device_assert", "tl.static_assert",
)  # fmt: skip
START = "_kl_start"  # the loop's variable
PEELED = "_kl_first_"  # prefix of a tile name in a pass's peeled first tile


@dataclass(frozen=True)
class Plan:
    """How a kernel splits: the offsets name and its tile constexpr, the run-time extent the loop runs to (the
    bound its mask compares against), the other tiles' constexprs (a launch's whole tile is their product with the
    split one) and the twin's body."""

    axis: str
    tile: str
    extent: str
    others: tuple[str, ...]
    body: tuple[cst.BaseStatement, ...]


def _store(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return False
    value = stmt.body[0].value
    return isinstance(value, cst.Call) and dotted(value.func) == "tl.store"


def _written(stmt: cst.CSTNode) -> set[str]:
    """Names a straight-line statement (an `if` of assignments included) assigns."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            found.update(names_in(node.target))

    stmt.visit(V())
    return found


def _read(stmt: cst.CSTNode) -> set[str]:
    """Names a statement reads: every name in it but those it only assigns, attribute names and keywords."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

    stmt.visit(V())
    return found


def _straight(kernel: cst.FunctionDef) -> list[cst.BaseStatement] | None:
    """The kernel's statements if it is straight-line code this family can split: one-statement lines of plain
    assignments to a name bound once, calls and `pass`, and `if` blocks of the same; nothing that loops, returns or
    binds a name twice. None otherwise."""
    if not isinstance(kernel.body, cst.IndentedBlock):
        return None
    seen: set[str] = set()

    def simple_ok(stmt: cst.CSTNode) -> bool:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return False
        small = stmt.body[0]
        if isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return True
        return assignment(stmt) is not None

    out = []
    for stmt in kernel.body.body:
        if isinstance(stmt, cst.If):
            branches = [stmt.body]
            orelse = stmt.orelse
            while isinstance(orelse, cst.If):
                branches.append(orelse.body)
                orelse = orelse.orelse
            if orelse is not None:
                branches.append(orelse.body)
            if not all(isinstance(b, cst.IndentedBlock) and all(simple_ok(s) for s in b.body) for b in branches):
                return None
            names = _written(stmt)
        elif isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
            small = stmt.body[0]
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString | cst.ConcatenatedString):
                continue  # a docstring
            if not simple_ok(stmt):
                return None
            names = _written(stmt)
        else:
            return None
        if names & seen:
            return None
        seen |= names
        out.append(stmt)
    return out


def _arange_tile(value: cst.BaseExpression, constexprs: set[str]) -> str | None:
    """B of `tl.arange(0, B)` with B a constexpr parameter, else None."""
    if not (isinstance(value, cst.Call) and dotted(value.func) == "tl.arange" and len(value.args) == 2):
        return None
    first, second = (a.value for a in value.args)
    if any(a.keyword is not None or a.star for a in value.args):
        return None
    if isinstance(first, cst.Integer) and first.value == "0" and isinstance(second, cst.Name):
        return second.value if second.value in constexprs else None
    return None


def _dimension(kernel: cst.FunctionDef, name: str) -> tuple[int, int] | None:
    """(dimension, of how many) `name` indexes, read off its broadcasts `name[None, :]` / `name[:, None]`; (0, 1)
    where it is never broadcast; None where its broadcasts disagree or are of another form."""
    found: set[tuple[int, int]] = set()

    class V(cst.CSTVisitor):
        def visit_Subscript(self, node: cst.Subscript) -> bool:
            if isinstance(node.value, cst.Name) and node.value.value == name:
                parts = []
                for element in node.slice:
                    s = element.slice
                    if isinstance(s, cst.Index) and isinstance(s.value, cst.Name) and s.value.value == "None":
                        parts.append("n")
                    elif isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None:
                        parts.append(":")
                    else:
                        parts.append("?")
                if parts.count(":") != 1 or "?" in parts:
                    found.add((-1, -1))
                else:
                    found.add((parts.index(":"), len(parts)))
                return False
            return True

    kernel.body.visit(V())
    if not found:
        return (0, 1)
    if len(found) != 1 or (-1, -1) in found:
        return None
    return found.pop()


def _tiles(kernel: cst.FunctionDef, stmts: list) -> dict[str, tuple[str, int, int]]:
    """Offsets names bound to `tl.arange(0, B)`: name -> (B, dimension, dimensions)."""
    constexprs = constexpr_params(kernel)
    out = {}
    for stmt in stmts:
        found = assignment(stmt)
        if found is None:
            continue
        tile = _arange_tile(found[1], constexprs)
        dim = _dimension(kernel, found[0]) if tile else None
        if tile and dim:
            out[found[0]] = (tile, *dim)
    return out


def _extent(kernel: cst.FunctionDef, axis: str, params: set[str], constexprs: set[str]) -> str | None:
    """The run-time bound `n` of every comparison `axis < n` (or `axis[None, :] < n`) in the kernel, if there is
    exactly one and it reads only parameters that are not constexpr; else None."""
    bounds: dict[str, cst.BaseExpression | None] = {}  # code -> the bound (None: a comparison of another kind)

    class V(cst.CSTVisitor):
        def visit_Comparison(self, node: cst.Comparison) -> None:
            left = node.left
            base = left.value if isinstance(left, cst.Subscript) else left
            if not (isinstance(base, cst.Name) and base.value == axis) or len(node.comparisons) != 1:
                return
            target = node.comparisons[0]
            less = isinstance(target.operator, cst.LessThan)
            bounds[node_code(target.comparator) if less else "?"] = target.comparator if less else None

    kernel.body.visit(V())
    if len(bounds) != 1 or "?" in bounds:
        return None
    ((bound, node),) = bounds.items()
    names = names_in(node)
    return bound if names and names <= params - constexprs else None


def _reduction(call: cst.CSTNode, dim: int, ndim: int) -> str | None:
    """The reduction (`tl.sum`, `tl.max`, `tl.min`) a call makes over dimension `dim` of `ndim`, else None: no
    `axis` (every dimension), or an integer literal `axis` that is `dim`, and nothing but `keep_dims` besides."""
    if not isinstance(call, cst.Call) or dotted(call.func) not in REDUCTIONS:
        return None
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args) or len(positional) > 2 or set(keywords) - {"axis", "keep_dims"}:
        return None
    if len(positional) == 2 and "axis" in keywords:
        return None
    axis = positional[1].value if len(positional) == 2 else keywords.get("axis")
    if axis is None or (isinstance(axis, cst.Name) and axis.value == "None"):
        return dotted(call.func)
    value = axis.value if isinstance(axis, cst.Integer) else None
    if isinstance(axis, cst.UnaryOperation) and isinstance(axis.operator, cst.Minus):
        value = f"-{axis.expression.value}" if isinstance(axis.expression, cst.Integer) else None
    if value is None:
        return None
    k = int(value, 0)
    return dotted(call.func) if (k + ndim if k < 0 else k) == dim else None


class _Split:
    """The kernel's statements sorted into what runs once before the sweeps (`free`), what each pass over the
    split dimension computes (`tile`, by the pass it first can run in: the reduced values it reads), the reductions
    over it (each a pass's accumulator) and what reads only reduced values (`reduced`, after the pass they need)."""

    def __init__(self, stmts: list, axis: str, dim: int, ndim: int):
        self.axis, self.dim, self.ndim = axis, dim, ndim
        self.kind: dict[str, str] = {}  # name -> "tile" | "reduced"
        self.level: dict[str, int] = {}
        self.items: list[dict] = []  # in order: {"stmt", "kind", "level", "reads", "writes", "combine"}
        self.counter = 0
        for stmt in stmts:
            self._add(stmt)

    def _dependence(self, reads: set[str]) -> tuple[str, int]:
        kinds = {self.kind[n] for n in reads if n in self.kind}
        level = max((self.level[n] for n in reads if n in self.level), default=0)
        return ("tile" if "tile" in kinds else "reduced" if "reduced" in kinds else "free"), level

    def _add(self, stmt: cst.BaseStatement) -> None:
        found = assignment(stmt)
        if found is not None and found[0] == self.axis:
            self.kind[self.axis], self.level[self.axis] = "tile", 0
            self.items.append({"stmt": stmt, "kind": "axis", "level": 0, "reads": set(), "writes": {self.axis}})
            return
        stmt = self._extract(stmt)
        reads, writes = _read(stmt), _written(stmt)
        kind, level = self._dependence(reads)
        if isinstance(stmt, cst.If) and kind == "tile":
            raise ValueError("a branch on the split dimension")
        for name in writes:
            if kind != "free":
                self.kind[name], self.level[name] = kind, level
        self.items.append({"stmt": stmt, "kind": kind, "level": level, "reads": reads, "writes": writes})

    def _extract(self, stmt: cst.BaseStatement) -> cst.BaseStatement:
        """`stmt` with each reduction over the split dimension of a tile value replaced by a fresh name, the
        reduction recorded before it as its own item (innermost first)."""
        split = self

        class Lift(cst.CSTTransformer):
            def leave_Call(self, original_node, updated_node):
                how = _reduction(updated_node, split.dim, split.ndim)
                if how is None:
                    return updated_node
                operand = updated_node.args[0].value
                kind, level = split._dependence(_read(cst.Expr(operand)))
                if kind != "tile":
                    return updated_node
                name = f"_kl_reduced{split.counter}"
                split.counter += 1
                line = cst.parse_statement(f"{name} = {node_code(updated_node)}")
                split.kind[name], split.level[name] = "reduced", level + 1
                split.items.append(
                    {
                        "stmt": line,
                        "kind": "reduction",
                        "level": level,
                        "reads": _read(line),
                        "writes": {name},
                        "combine": how,
                        "call": updated_node,
                    }
                )
                return cst.Name(name)

        return stmt.visit(Lift())


def _renamed(stmt: cst.BaseStatement, names: set[str], prefix: str) -> cst.BaseStatement:
    class R(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            if updated_node.value not in names:
                return updated_node
            return updated_node.with_changes(value=prefix + updated_node.value)

        def leave_Attribute(self, original_node, updated_node):
            # `x.to(...)`'s attribute name is no variable: keep it as it was
            return updated_node.with_changes(attr=original_node.attr)

        def leave_Arg(self, original_node, updated_node):
            return updated_node.with_changes(keyword=original_node.keyword)

    return stmt.visit(R())


def _needed(items: list[dict], wanted: list[dict]) -> list[dict]:
    """The tile items `wanted` reads, transitively, with `wanted` itself, in program order."""
    by_name = {n: it for it in items if it["kind"] in ("tile", "axis") for n in it["writes"]}
    keep, todo = {id(w) for w in wanted}, list(wanted)
    while todo:
        for name in todo.pop()["reads"]:
            it = by_name.get(name)
            if it is not None and id(it) not in keep:
                keep.add(id(it))
                todo.append(it)
    return [it for it in items if id(it) in keep]


def looped_body(kernel: cst.FunctionDef) -> Plan | None:
    """The kernel's twin body: its straight-line statements with the innermost tiled dimension swept in a loop,
    one pass per level of reductions over it; None where the kernel is not of the form this family splits."""
    code = node_code(kernel)
    if any(name + "(" in code for name in SHAPED):
        return None  # (a loop anywhere is refused by `_straight`)
    stmts = _straight(kernel)
    if stmts is None:
        return None
    tiles = _tiles(kernel, stmts)
    if not tiles:
        return None
    stored = [i for i, stmt in enumerate(stmts) if _calls_store(stmt)]
    if stored and any("tl.load(" in node_code(stmt) for stmt in stmts[stored[0] + 1 :]):
        return None  # a load after a store may read it; the twin moves loads before every store
    inner = [(name, t) for name, t in tiles.items() if t[1] == t[2] - 1 and t[2] == max(x[2] for x in tiles.values())]
    if len(inner) != 1:
        return None
    axis, (tile, dim, ndim) = inner[0]
    # the tile constexpr only sizes the offsets: a `BLOCK` used anywhere else (a divisor, a shape) would change
    # meaning when it shrinks to the swept tile
    uses = sum(1 for n in name_uses(kernel.body) if n == tile)
    if uses != 1:
        return None
    params = {p.name.value for p in kernel.params.params}
    extent = _extent(kernel, axis, params, constexpr_params(kernel))
    if extent is None:
        return None
    try:
        split = _Split(stmts, axis, dim, ndim)
    except ValueError:
        return None
    items = split.items
    reductions = [it for it in items if it["kind"] == "reduction"]
    stores = [it for it in items if it["kind"] == "tile" and _store(it["stmt"])]
    if not reductions and not stores:
        return None
    if any(it["kind"] == "tile" and not _store(it["stmt"]) and _calls_store(it["stmt"]) for it in items):
        return None
    last = max([it["level"] for it in reductions] + [it["level"] for it in stores])
    if any(it["level"] != last for it in stores):
        return None  # a store a later pass could read back, or one that would run once per pass
    others = tuple(t[0] for name, t in tiles.items() if name != axis)
    return Plan(axis, tile, extent, others, tuple(_emit(items, reductions, stores, axis, tile, extent, last)))


def _calls_store(stmt: cst.CSTNode) -> bool:
    return "tl.store(" in node_code(stmt)


def _emit(items, reductions, stores, axis, tile, extent, last) -> list[cst.BaseStatement]:
    offsets = f"{axis} = {START} + tl.arange(0, {tile})"
    out: list[cst.BaseStatement] = [it["stmt"] for it in items if it["kind"] == "free" and not _calls_store(it["stmt"])]
    emitted: set[int] = set()
    levels = sorted({it["level"] for it in reductions} | ({last} if stores else set()))
    for level in levels:
        for it in items:  # what this pass reads of earlier passes, computed once before it
            ready = it["kind"] == "reduced" and it["level"] <= level and id(it) not in emitted
            if ready and not _calls_store(it["stmt"]):
                out.append(it["stmt"])
                emitted.add(id(it))
        mine = [it for it in reductions if it["level"] == level]
        wanted = mine + (stores if level == last else [])
        body = [it for it in _needed(items, wanted) if it["kind"] in ("tile", "axis")]
        loop_body = [cst.parse_statement(offsets)] + [it["stmt"] for it in body if it["kind"] == "tile"]
        if mine:
            # the first tile peeled: each accumulator starts as the reduction of it, in the reduction's own type
            # and shape; its tile values renamed, so none is carried into the loop
            names = set().union(*(it["writes"] for it in body))
            first = [cst.parse_statement(f"{PEELED}{axis} = tl.arange(0, {tile})")]
            first += [_renamed(it["stmt"], names, PEELED) for it in body if it["kind"] == "tile"]
            first += [_renamed(it["stmt"], names, PEELED) for it in mine]
            first[0] = first[0].with_changes(
                leading_lines=[cst.EmptyLine(comment=cst.Comment(f"# pass {levels.index(level) + 1}: the first tile"))]
            )
            out += first
            for it in mine:
                name = next(iter(it["writes"]))
                how = REDUCTIONS[it["combine"]]
                call = node_code(it["call"])
                combined = f"{how}({name}, {call})" if how else f"{name} + {call}"
                loop_body.append(cst.parse_statement(f"{name} = {combined}"))
            start = tile
        else:
            start = "0"
        loop = cst.parse_statement(f"for {START} in range({start}, {extent}, {tile}):\n    pass\n")
        out.append(loop.with_changes(body=loop.body.with_changes(body=loop_body)))
    for it in items:  # the rest in program order: reduced values no pass reads, and every store of them
        if (it["kind"] == "reduced" and id(it) not in emitted) or (it["kind"] == "free" and _calls_store(it["stmt"])):
            out.append(it["stmt"])
    return out


def looped_twin(kernel: cst.FunctionDef, plan: Plan | None = None) -> cst.FunctionDef | None:
    """The kernel's looped twin (`plan`: its `looped_body`, where the caller has it), or None."""
    plan = plan or looped_body(kernel)
    if plan is None:
        return None
    comment = (
        f"# {kernel.name.value} with {plan.axis} swept in tiles of {plan.tile}, launched where the whole tile would "
        "not fit in registers."
    )
    lines = (cst.EmptyLine(), cst.EmptyLine(), cst.EmptyLine(comment=cst.Comment(comment)))
    body = kernel.body.with_changes(body=list(plan.body))
    return kernel.with_changes(name=cst.Name(kernel.name.value + TWIN), body=body, leading_lines=lines)


def _whole(call: cst.Call, kernel: cst.FunctionDef, plan: Plan | None, host: cst.FunctionDef) -> dict | None:
    """What a launch of a splittable kernel (`plan`: its `looped_body`) passes: the split tile's
    `triton.next_power_of_2(...)` (written there, or a name the launching function binds once to it), the other
    tiles' expressions and the warps. None where the split tile is not the whole extent's power of two or a tile is
    not passed by keyword."""
    if plan is None or is_autotuned(kernel):
        return None
    split = kwarg(call, plan.tile)
    whole = split.value if split is not None else None
    if isinstance(whole, cst.Name):
        whole = bound_once(host).get(whole.value)
    if not isinstance(whole, cst.Call) or dotted(whole.func) not in ("triton.next_power_of_2", "next_power_of_2"):
        return None
    others = []
    for tile in plan.others:
        arg = kwarg(call, tile)
        if arg is None:
            return None
        others.append(node_code(arg.value))
    warps = kwarg(call, "num_warps")
    return {
        "kernel": kernel.name.value,
        "tile": plan.tile,
        "whole": node_code(split.value),  # the name where the host bound one: it holds the power of two
        "others": f"({' * '.join(others)})" if others else "1",
        "warps": node_code(warps.value) if warps is not None else str(DEFAULT_WARPS),
    }


def _swept_values(module: Module, kernel: str) -> list[cst.Integer]:
    """The `per_thread * 32` literals of the swept tiles `optimized` writes into the launches of `kernel`'s looped
    twin: `max(1, min(WHOLE, <literal> * W [// OTHERS]))`."""
    found = []
    for call in launches(module.tree):
        if call.func.value.value != kernel + TWIN:
            continue
        for arg in call.args:
            value = arg.value
            if arg.keyword is None or not _named_call(value, "max") or not _named_call(value.args[1].value, "min"):
                continue
            if not (isinstance(value.args[0].value, cst.Integer) and value.args[0].value.value == "1"):
                continue
            left = value.args[1].value.args[1].value
            while isinstance(left, cst.BinaryOperation):
                left = left.left
            if isinstance(left, cst.Integer) and int(left.value) % 32 == 0:
                found.append(left)
    return found


def _named_call(node: cst.BaseExpression, name: str) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == name
        and len(node.args) == 2
    )


def _dispatched(module: Module, node: cst.If) -> tuple[cst.SimpleStatementLine, dict] | None:
    """For the dispatch this family writes, (the one-tile launch statement, what it launches): `if ...: k[grid](...)
    else: k_looped[grid](...)` with k_looped the twin `looped_twin(k)` writes."""
    if not isinstance(node.orelse, cst.Else) or len(node.body.body) != 1 or len(node.orelse.body.body) != 1:
        return None
    one, looped = node.body.body[0], node.orelse.body.body[0]
    call, twin_call = launch_statement(one), launch_statement(looped)
    if call is None or twin_call is None or twin_call.func.value.value != call.func.value.value + TWIN:
        return None
    kernels = module.kernels()
    kernel, twin = kernels.get(call.func.value.value), kernels.get(twin_call.func.value.value)
    if kernel is None or twin is None:
        return None
    made = looped_twin(kernel, module.once(kernel, looped_body))
    if made is None or node_code(made.with_changes(leading_lines=())) != node_code(twin.with_changes(leading_lines=())):
        return None
    return one, {"kernel": kernel.name.value}


@register
class LoopedTile(AnchoredTransform):
    """Intent: a kernel that holds a whole dimension in one tile reads it once, while the tile fits; past PER_THREAD
    values a thread it spills to local memory, and a loop over the dimension in capped tiles, reading it once per
    reduction level, is faster.

    Expert form: `if WHOLE * OTHERS <= 1024 * W: k[grid](..., B=WHOLE) else: k_looped[grid](..., B=capped)` with
    `k_looped` the twin `looped_twin(k)` writes: each reduction over the split dimension a pass of its own, the
    stores in the last. Simple form: the launch of `k` alone. Params: `per_thread`, the swept tile's values a
    thread (a power of two up to 32, default 8); the twin itself is derived from the kernel.

    Conditions: the kernel is straight-line (no loop, no early return), binds each name once, sizes the split
    dimension only by `tl.arange(0, B)` and masks it by one run-time bound; its reductions over the split
    dimension are `tl.sum`, `tl.max` or `tl.min`; every store along the split dimension runs in the last pass; no
    call that sees the dimension's extent or order (a scan, a sort, a reshape, an atomic); no load after a store.

    Failure: where the tile fits, more passes read the dimension more times (the dispatch keeps the one-tile
    kernel there); sums accumulate in another order (float results may differ in the last bits); a kernel that
    stores what a later pass loads would read its own output (refused: stores only in the last pass)."""

    id = "looped_tile"
    family = 8
    tag = "S"
    cost = 4
    conditions = ("no_aliasing",)
    intent = "sweep a dimension too wide for one tile in capped tiles instead of holding it whole"
    forward_rank = 2
    twin_suffix = TWIN

    # the swept tile's ladder goes up first: the default is the moderate tile, and on FlagGems's group norm (H100,
    # retime_rewrite, RESULTS.md#wild-h100-9) 16 values a thread ran at 0.276 ms where 8 ran at 0.392 ms
    ladder_first = 2.0

    def default_params(self) -> dict:
        return {"per_thread": str(SWEPT_PER_THREAD)}

    def ladders(self, source: str) -> dict[str, tuple[str, str]]:
        """The kernels whose looped twin is launched with a swept tile this family computed from `per_thread`
        (`max(1, min(WHOLE, per_thread * 32 * W // OTHERS))`): no literal tile for the launch-configuration search."""
        try:
            module = Module(source)
        except cst.ParserSyntaxError:
            return {}
        kernels = module.kernels()
        return {k: (k + TWIN, "per_thread") for k in kernels if k + TWIN in kernels and _swept_values(module, k)}

    def scaled_ladder(self, source: str, kernel: str, factor: float) -> str | None:
        """`source` with the per_thread of every launch of `kernel`'s looped twin scaled by `factor`, a power of two
        within 1..PER_THREAD; None where that leaves the range or nothing moves."""
        module = Module(source)
        found = _swept_values(module, kernel)
        if not found:
            return None
        replaced = {}
        for node in found:
            per_thread = int(node.value) // 32 * factor
            if (
                per_thread != int(per_thread)
                or not 1 <= per_thread <= PER_THREAD
                or int(per_thread) & (int(per_thread) - 1)
            ):
                return None
            replaced[node] = cst.Integer(str(int(per_thread) * 32))
        return replace_nodes(module.tree, replaced).code

    def untimed(self, source: str, site, launches: list[dict] | None) -> str:
        """Why the bench case would run the one-tile kernel: its launches asked for a tile of at most 1024 x warps
        elements, which the dispatch keeps ('' where they did not, or are unknown)."""
        kernel = site.params.get("kernel")
        elements = launch_config.launched_elements(source, kernel, launches) if kernel else None
        warps = {row.get("num_warps") for row in launch_config.kernel_rows(launches, kernel or "")}
        if elements is None or len(warps) != 1 or not isinstance(next(iter(warps)), int):
            return ""
        cap = PER_THREAD * 32 * next(iter(warps))
        if elements > cap:
            return ""
        return (
            f"the bench case launches {kernel} with a {elements}-element tile, within the {cap} the dispatch keeps "
            "in one tile: the timed case would run the present kernel"
        )

    def expert_anchors(self, module: Module):
        found = []
        for node in module.positions:
            if isinstance(node, cst.If) and module.enclosing(node) is not None:
                hit = _dispatched(module, node)
                if hit is not None:
                    found.append((node, hit[1]))
        return found

    def simple(self, node, params):
        one = node.body.body[0]
        return one.with_changes(leading_lines=(*node.leading_lines, *one.leading_lines))

    def plain_anchors(self, module: Module):
        if "triton" not in imported_modules(module.tree):
            return []
        found = []
        kernels = module.kernels()
        for node in module.positions:
            if not isinstance(node, cst.SimpleStatementLine) or module.enclosing(node) is None:
                continue
            call = launch_statement(node)
            kernel = kernels.get(call.func.value.value) if call is not None else None
            if kernel is None or kernel.name.value + TWIN in kernels:
                continue
            seen = _whole(call, kernel, module.once(kernel, looped_body), module.enclosing(node))
            if seen is not None:
                found.append((node, seen))
        return found

    def optimized(self, node, params):
        call = launch_statement(node)
        cap = f"{PER_THREAD * 32} * {params['warps']}"
        per_thread = int(params.get("per_thread", SWEPT_PER_THREAD))
        if not 1 <= per_thread <= PER_THREAD or per_thread & (per_thread - 1):
            raise ValueError(f"looped_tile: per_thread={per_thread}, a power of two up to {PER_THREAD}")
        swept = f"{per_thread * 32} * {params['warps']}"
        others = params["others"]
        whole = params["whole"] if others == "1" else f"{params['whole']} * {others}"
        capped = f"max(1, min({params['whole']}, {swept}{'' if others == '1' else f' // {others}'}))"
        twin = call.with_changes(
            func=call.func.with_changes(value=cst.Name(params["kernel"] + TWIN)),
            args=[
                a.with_changes(value=cst.parse_expression(capped))
                if a.keyword is not None and a.keyword.value == params["tile"]
                else a
                for a in call.args
            ],
        )
        twin_line = node.with_changes(
            body=[node.body[0].with_changes(value=twin)],
            leading_lines=[
                cst.EmptyLine(
                    comment=cst.Comment(
                        f"# The whole tile would hold more than {PER_THREAD} values a thread: sweep it in tiles "
                        "that do not."
                    )
                )
            ],
        )
        skeleton = cst.parse_statement(f"if {whole} <= {cap}:\n    pass\nelse:\n    pass\n")
        return skeleton.with_changes(
            body=skeleton.body.with_changes(body=[node.with_changes(leading_lines=())]),
            orelse=skeleton.orelse.with_changes(body=skeleton.orelse.body.with_changes(body=[twin_line])),
            leading_lines=node.leading_lines,
        )

    def _apply(self, source: str, site, plain: bool, params: dict | None) -> str:
        out = super()._apply(source, site, plain, params)
        module = Module(out)
        name = site.params["kernel"]
        kernel = module.kernels().get(name)
        if kernel is None or kernel not in module.tree.body:
            raise ValueError(f"looped_tile: {name} is not a module-level kernel")
        body = list(module.tree.body)
        if plain:  # the dispatch launches a twin that does not exist yet: write it after the kernel
            twin = looped_twin(kernel)
            if twin is None:
                raise ValueError(f"looped_tile: {name} does not split")
            body.insert(body.index(kernel) + 1, twin)
        else:  # the twin no launch calls any more
            body = [n for n in body if not (isinstance(n, cst.FunctionDef) and n.name.value == name + TWIN)]
        return module.tree.with_changes(body=body).code
