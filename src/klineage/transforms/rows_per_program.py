"""Family 11: work per program (several rows per program, chosen by a host dispatch)."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    launch_statement,
    launches,
    leading_comments,
    statement_code,
)


def _one_row_launch(stmt: cst.CSTNode) -> cst.Call | None:
    """`kernel[(n,)](...)` as a statement of its own: one program per row."""
    call = launch_statement(stmt)
    if call is None or len(call.func.slice) != 1:
        return None
    index = call.func.slice[0].slice
    grid = index.value if isinstance(index, cst.Index) else None
    if isinstance(grid, cst.Tuple) and len(grid.elements) == 1 and isinstance(grid.elements[0], cst.Element):
        return call
    return None


def _rows_of(call: cst.Call) -> str | None:
    """For `kernel[(cdiv(n, R), ...)](...)`: the code of n (the rows are tiled by R per program)."""
    index = call.func.slice[0].slice if len(call.func.slice) == 1 else None
    grid = index.value if isinstance(index, cst.Index) else None
    if not isinstance(grid, cst.Tuple) or not grid.elements:
        return None
    first = grid.elements[0].value
    if isinstance(first, cst.Call) and dotted(first.func) in ("triton.cdiv", "cdiv") and len(first.args) == 2:
        return node_code(first.args[0].value)
    return None


def _dispatch(node: cst.If) -> tuple[str, cst.SimpleStatementLine] | None:
    """("body" or "orelse", the one-row launch) for `if cond: <one row> else: <rows per program>`."""
    if not isinstance(node.orelse, cst.Else) or not isinstance(node.body, cst.IndentedBlock):
        return None
    for side, mine, other in (("body", node.body, node.orelse.body), ("orelse", node.orelse.body, node.body)):
        if not isinstance(mine, cst.IndentedBlock) or len(mine.body) != 1:
            continue
        call = _one_row_launch(mine.body[0])
        if call is None:
            continue
        rows = _one_row_grid(call)
        tiled = [c for c in launches(other) if _rows_of(c) == rows and c.func.value.value != call.func.value.value]
        if tiled:
            return side, mine.body[0]
    return None


def _one_row_grid(call: cst.Call) -> str:
    return node_code(call.func.slice[0].slice.value.elements[0].value)


@register
class RowsPerProgram(AnchoredTransform):
    """Intent: for narrow rows and many of them, one program handles a BLOCK_ROW x BLOCK tile of rows instead of a
    single row (Liger `_block_rms_norm_*` when BLOCK_SIZE <= 256 and n_rows >= 32768): fewer, fuller programs,
    and the shared operand (the weight row) is loaded once per tile. The host dispatches between the one-row
    kernel and the rows-per-program kernel.

    Conditions: the rows kernel masks its rows (the last tile is partial when n_rows is not a multiple of
    BLOCK_ROW, and tiles past the end are entirely masked), and its per-row results do not mix rows.

    Failure: a rows kernel without a row mask, or one that reduces over the whole tile instead of per row, reads
    and writes past the last row (out of bounds) or mixes rows of a partial tile into each other's statistics;
    the error shows only when n_rows is not a multiple of BLOCK_ROW. The simplified program (always one row per
    program) is correct for every shape.

    Sites: a host `if cond: kernel_one_row[(n_rows,)](...) else: ... kernel_rows[(triton.cdiv(n_rows, R),)](...)`
    (either order), where the one-row branch is that single launch. Simplify: the one-row launch takes the if's
    place (the dispatch is constant-folded). Params: `condition`, `one_row` (which branch), `rows_branch` (its
    code), `dispatch` (the whole statement) and `leading` (comment lines above it). Optimize: a launch statement
    with a one-element grid `(n,)`; needs the expert's dispatch."""

    id = "rows_per_program"
    family = 11
    tag = "S"
    cost = 4
    conditions = ("fully_masked_rows", "divisible_by_block")  # a row count that BLOCK_ROW does not divide
    intent = "process a tile of narrow rows per program instead of one row"

    def expert_anchors(self, module: Module):
        found = []
        for node in module.positions:
            if isinstance(node, cst.If) and module.enclosing(node) is not None:
                hit = _dispatch(node)
                if hit is not None:
                    side, _ = hit
                    rows = node.orelse.body if side == "body" else node.body
                    found.append((node, {
                        "condition": node_code(node.test),
                        "one_row": side,
                        "rows_branch": "\n".join(node_code(s) for s in rows.body),
                        "dispatch": statement_code(node),
                        "leading": leading_comments(node),
                    }))  # fmt: skip
        return found

    def simple(self, node, params):
        _, stmt = _dispatch(node)
        return stmt.with_changes(leading_lines=(*node.leading_lines, *stmt.leading_lines))

    def plain_anchors(self, module: Module):
        return [(n, {}) for n in module.positions
                if isinstance(n, cst.SimpleStatementLine) and _one_row_launch(n) is not None]  # fmt: skip

    def optimized(self, node, params):
        dispatch = cst.parse_statement(params["dispatch"])
        if not isinstance(dispatch, cst.If) or _dispatch(dispatch) is None:
            raise ValueError("rows_per_program: `dispatch` is not a one-row / rows-per-program dispatch")
        side, _ = _dispatch(dispatch)
        n_lead = len(params.get("leading", []))
        stmt = node.with_changes(leading_lines=node.leading_lines[n_lead:])
        if side == "body":
            dispatch = dispatch.with_changes(body=dispatch.body.with_changes(body=[stmt]))
        else:
            orelse = dispatch.orelse
            dispatch = dispatch.with_changes(orelse=orelse.with_changes(body=orelse.body.with_changes(body=[stmt])))
        return dispatch.with_changes(leading_lines=node.leading_lines[:n_lead])
