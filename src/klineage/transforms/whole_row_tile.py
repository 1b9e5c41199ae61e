"""Family 8 (kernel side): a row held in one tile, dispatched at launch when it fits, instead of swept in tiles."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, kwarg, node_code, register, with_kwargs
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    broadcasts,
    kernel_param_for,
    leading_comments,
    names_in,
    statement_code,
)
from klineage.transforms.block_cap_dispatch import FIXED_BLOCK

# The widest row the generated dispatch holds in one tile: 65536 // 2 elements, Liger's cross-entropy cap ("less
# register spilling"; catalog family 8). At 32 warps that is 32 fp32 values per thread for each tile-wide value.
FUSED_CAP = 32768
TWIN = "_one_tile"
# Warps for a one-tile launch, by tile width: Liger's calculate_settings ladder (catalog family 9).
WARPS = "4 if {t} < 2048 else 8 if {t} < 8192 else 16 if {t} < 32768 else 32"


def _constexpr_params(kernel: cst.FunctionDef) -> set[str]:
    return {p.name.value for p in kernel.params.params
            if p.annotation is not None and "constexpr" in node_code(p.annotation.annotation)}  # fmt: skip


def _sweep(loop: cst.For, params: set[str], constexprs: set[str]) -> tuple[str, str] | None:
    """(n, B) for a column sweep `for s in range(0, n, B)` (or `tl.range`): n a run-time parameter, B a constexpr
    one, no `else`, and nothing in the body that leaves the loop or loops again."""
    it = loop.iter
    if not (isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range") and isinstance(loop.target, cst.Name)
            and loop.orelse is None):  # fmt: skip
        return None
    positional = [a.value for a in it.args if a.keyword is None and not a.star]
    if len(positional) != 3 or not (isinstance(positional[0], cst.Integer) and positional[0].value == "0"):
        return None
    n, step = positional[1], positional[2]
    if not (isinstance(n, cst.Name) and n.value in params - constexprs and isinstance(step, cst.Name)
            and step.value in constexprs):  # fmt: skip
        return None
    exits = []

    class V(cst.CSTVisitor):
        def visit_Break(self, node) -> None:
            exits.append(node)

        def visit_Continue(self, node) -> None:
            exits.append(node)

        def visit_Return(self, node) -> None:
            exits.append(node)

        def visit_For(self, node) -> None:
            exits.append(node)

        def visit_While(self, node) -> None:
            exits.append(node)

    loop.body.visit(V())
    return None if exits else (n.value, step.value)


def column_sweeps(kernel: cst.FunctionDef) -> tuple[list[cst.For], str, str] | None:
    """The sweeps of a 1-D row kernel whose every loop is a column sweep over the same width n and tile B:
    (loops, n, B); None for any other kernel (no loop, a loop of another kind, a 2-D tile or a `tl.dot`, whose
    loops are a GEMM's K loop rather than sweeps over a row)."""
    code = node_code(kernel)
    if broadcasts(code) or "tl.dot" in code:
        return None
    params = {p.name.value for p in kernel.params.params}
    constexprs = _constexpr_params(kernel)
    loops: list[cst.For] = []
    others: list[cst.CSTNode] = []

    class V(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> bool:
            loops.append(node)
            return False  # a loop inside a sweep makes `_sweep` refuse it

        def visit_While(self, node: cst.While) -> None:
            others.append(node)

    kernel.body.visit(V())
    found = [_sweep(loop, params, constexprs) for loop in loops]
    if not loops or others or None in found or len(set(found)) != 1:
        return None
    n, step = found[0]
    return loops, n, step


def _launch_statement(stmt: cst.CSTNode) -> cst.Call | None:
    """The launch `kernel[grid](...)` that makes up a statement line, or None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr)):
        return None
    call = stmt.body[0].value
    ok = isinstance(call, cst.Call) and isinstance(call.func, cst.Subscript) and isinstance(call.func.value, cst.Name)
    return call if ok else None


def _simple_expr(node: cst.BaseExpression) -> bool:
    """A width the host can test without side effects: names, attributes, subscripts, integers."""
    if isinstance(node, cst.Name | cst.Integer):
        return True
    if isinstance(node, cst.Attribute):
        return _simple_expr(node.value)
    if isinstance(node, cst.Subscript):
        return _simple_expr(node.value) and all(
            isinstance(s.slice, cst.Index) and _simple_expr(s.slice.value) for s in node.slice)
    return False


def _looped_launch(module: Module, call: cst.Call) -> dict | None:
    """For a launch of a sweeping row kernel of this module that passes the tile by keyword: the kernel, its tile
    parameter and the host's width expression."""
    kernel = module.kernels().get(call.func.value.value)
    if kernel is None or (found := column_sweeps(kernel)) is None:
        return None
    _, n, step = found
    if kwarg(call, step) is None:
        return None
    width = next((a.value for a in call.args if kernel_param_for(kernel, call, a) == n), None)
    if width is None or not _simple_expr(width):
        return None
    return {"kernel": kernel.name.value, "tile": step, "width": node_code(width)}


def _sweepless(kernel: cst.FunctionDef) -> bool:
    loops = []

    class V(cst.CSTVisitor):
        def visit_For(self, node) -> None:
            loops.append(node)

        def visit_While(self, node) -> None:
            loops.append(node)

    kernel.body.visit(V())
    return not loops


def _dispatch(module: Module, node: cst.If) -> tuple[str, cst.SimpleStatementLine, dict] | None:
    """For `if cond: <one launch> else: <one launch>` where one kernel holds the row in one tile (no loop) and the
    other sweeps it: (the looped side, its launch statement, what `_looped_launch` read)."""
    if not isinstance(node.orelse, cst.Else) or not isinstance(node.body, cst.IndentedBlock):
        return None
    if not isinstance(node.orelse.body, cst.IndentedBlock):
        return None
    sides = {"body": node.body.body, "orelse": node.orelse.body.body}
    if any(len(stmts) != 1 or _launch_statement(stmts[0]) is None for stmts in sides.values()):
        return None
    kernels = module.kernels()
    for side, other in (("body", "orelse"), ("orelse", "body")):
        looped, single = _launch_statement(sides[side][0]), _launch_statement(sides[other][0])
        one = kernels.get(single.func.value.value)
        found = _looped_launch(module, looped)
        if (found is not None and one is not None and one.name.value != found["kernel"] and _sweepless(one)
                and node_code(single.func.slice[0]) == node_code(looped.func.slice[0])):  # fmt: skip
            return side, sides[side][0], found
    return None


def _with_kwarg(call: cst.Call, name: str, code: str) -> cst.Call:
    value = cst.parse_expression(code)
    if kwarg(call, name) is None:
        return with_kwargs(call, {name: code})
    return call.with_changes(args=[a.with_changes(value=value) if a.keyword is not None and a.keyword.value == name
                                   else a for a in call.args])  # fmt: skip


def one_tile_twin(kernel: cst.FunctionDef) -> cst.FunctionDef:
    """The kernel with every column sweep run once at offset 0 (valid when its tile covers the row)."""
    loops, _, _ = column_sweeps(kernel)
    targets = {id(loop) for loop in loops}

    class Unroll(cst.CSTTransformer):
        def leave_For(self, original_node, updated_node):
            if id(original_node) not in targets:
                return updated_node
            start = cst.parse_statement(f"{original_node.target.value} = 0")
            start = start.with_changes(leading_lines=updated_node.leading_lines)
            return cst.FlattenSentinel([start, *updated_node.body.body])

    comment = ("# One tile covers the row (launched only when it does): each sweep below runs once, and the "
               "compiler merges")  # fmt: skip
    lines = (
        cst.EmptyLine(),
        cst.EmptyLine(),
        cst.EmptyLine(comment=cst.Comment(comment)),
        cst.EmptyLine(comment=cst.Comment("# the sweeps' identical loads: the row is read from memory once, not once "
                                          "per sweep.")),
    )  # fmt: skip
    body = kernel.body.visit(Unroll())
    return kernel.with_changes(name=cst.Name(kernel.name.value + TWIN), body=body, leading_lines=lines)


@register
class WholeRowTile(AnchoredTransform):
    """Intent: hold a row in one tile, `BLOCK = next_power_of_2(n)`, when it fits, so a kernel that sweeps the row
    two or three times (statistics, then the output) reads it from memory once; rows wider than the cap keep the
    looped kernel. The host dispatches between the two (Liger's softmax single/multi-block kernels; FlagGems'
    `ONE_TILE_PER_CTA`; catalog family 8).

    Conditions: the one-tile kernel is launched only where the row fits its tile (n <= BLOCK: the dispatch and
    `next_power_of_2` see to it); its masks cover the lanes past the row; the tile fits in registers (the cap, and
    warps that grow with the tile).

    Failure: a one-tile kernel launched on a row wider than its tile silently drops the columns past the tile (a
    wrong result with no error); an uncapped tile spills registers or fails to compile (more than 2**20 elements).
    The simplified program (always the looped kernel, with a fixed moderate tile) is correct for every width.

    Sites: a host `if cond: one_tile[grid](...) else: looped[grid](...)` (either order), each branch that single
    launch, the one-tile kernel without loops, the looped kernel's every loop a column sweep `range(0, n, B)` with B
    passed by keyword. Simplify: the looped launch takes the if's place, its tile set to 1024. Params: `dispatch`
    (the whole statement) and `leading` (its comment lines). Optimize: a launch statement of a sweeping row kernel
    (1-D, every loop `range(0, n, B)`); with the expert's `dispatch` (in the expert's own program) that statement;
    elsewhere a generated twin of the kernel, each sweep run once at offset 0, launched when `n <= cap` with the
    tile `next_power_of_2(n)` and warps by tile width, the original launch otherwise."""

    id = "whole_row_tile"
    family = 8
    tag = "S"
    cost = 4
    conditions = ("divisible_by_block", "shared_memory_fits")
    intent = "hold a row that fits in one tile instead of sweeping it in fixed tiles"

    def default_params(self) -> dict:
        return {"cap": str(FUSED_CAP)}

    def expert_anchors(self, module: Module):
        found = []
        self._looped = {}  # anchor -> its looped launch and tile parameter, for `simple` (which sees no module)
        for node in module.positions:
            if isinstance(node, cst.If) and module.enclosing(node) is not None and (hit := _dispatch(module, node)):
                self._looped[id(node)] = hit[1:]
                found.append((node, {"dispatch": statement_code(node), "leading": leading_comments(node)}))
        return found

    def simple(self, node, params):
        stmt, seen = self._looped[id(node)]
        call = _launch_statement(stmt)
        fixed = stmt.with_changes(body=[stmt.body[0].with_changes(value=_with_kwarg(call, seen["tile"],
                                                                                    str(FIXED_BLOCK)))])  # fmt: skip
        return fixed.with_changes(leading_lines=(*node.leading_lines, *stmt.leading_lines))

    def plain_anchors(self, module: Module):
        found = []
        for node in module.positions:
            if not isinstance(node, cst.SimpleStatementLine) or module.enclosing(node) is None:
                continue
            call = _launch_statement(node)
            if call is None or (seen := _looped_launch(module, call)) is None:
                continue
            if seen["kernel"] + TWIN in module.kernels() or "triton" not in _imported(module):
                continue  # applied already (this is the fallback launch), or no triton.next_power_of_2 to call
            if {"row_tile", "row_warps"} & names_in(module.enclosing(node)):
                continue  # the names the dispatch writes are taken
            found.append((node, seen))
        return found

    def optimized(self, node, params):
        if params.get("dispatch"):
            dispatch = cst.parse_statement(params["dispatch"])
            if not isinstance(dispatch, cst.If):
                raise ValueError("whole_row_tile: `dispatch` is not an if statement")
            n_lead = len(params.get("leading", []))
            return dispatch.with_changes(leading_lines=node.leading_lines[:n_lead])
        call = _launch_statement(node)
        tile, warps = "row_tile", "row_warps"
        one = _with_kwarg(call, params["tile"], tile)
        one = _with_kwarg(one, "num_warps", warps)
        one = one.with_changes(func=one.func.with_changes(value=cst.Name(params["kernel"] + TWIN)))
        cap = int(params.get("cap", FUSED_CAP))
        code = (f"if {params['width']} <= {cap}:\n"
                f"    # The row fits one tile: the twin reads it once instead of once per sweep.\n"
                f"    {tile} = triton.next_power_of_2({params['width']})\n"
                f"    {warps} = {WARPS.format(t=tile)}\n"
                f"    {node_code(one)}\n"
                f"else:\n"
                f"    {statement_code(node)}\n")  # fmt: skip
        return cst.parse_statement(code).with_changes(leading_lines=node.leading_lines)

    def _apply(self, source: str, site, plain: bool, params: dict | None) -> str:
        out = super()._apply(source, site, plain, params)
        if not plain or (params or {}).get("dispatch"):
            return out
        # the generated dispatch launches a twin that does not exist yet: write it after the kernel
        module = Module(out)
        kernel_name = _launch_statement_kernel(site.before)
        kernel = module.kernels().get(kernel_name)
        if kernel is None or kernel not in module.tree.body:
            raise ValueError(f"whole_row_tile: {kernel_name} is not a module-level kernel")
        body = list(module.tree.body)
        i = body.index(kernel)
        body.insert(i + 1, one_tile_twin(kernel))
        return module.tree.with_changes(body=body).code


def _imported(module: Module) -> set[str]:
    names = set()
    for stmt in module.tree.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import):
                    names.update(node_code(a.name).split(".")[0] for a in small.names)
    return names


def _launch_statement_kernel(code: str) -> str | None:
    stmt = cst.parse_statement(code)
    call = _launch_statement(stmt)
    return call.func.value.value if call is not None else None
