"""Family 16: skipping work with an early exit in a kernel."""

from __future__ import annotations

import libcst as cst

from klineage.transform import register
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    calls_to,
    is_jit,
    leading_comments,
    leading_lines,
    returns_in,
    statement_code,
)


def _is_bare_return(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Return)
        and stmt.body[0].value is None
    )


def _early_exit(fn: cst.FunctionDef) -> tuple[int, cst.If, str] | None:
    """The first top-level `if cond: [stores...] return` of a kernel: (index in the body, the If, kind), where kind
    is "pure" (the branch only returns) or "writes" (it stores results before returning). Other shapes: None."""
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    for i, stmt in enumerate(fn.body.body):
        if not isinstance(stmt, cst.If) or stmt.orelse is not None or not isinstance(stmt.body, cst.IndentedBlock):
            continue
        body = stmt.body.body
        if not body or not _is_bare_return(body[-1]) or returns_in(stmt) != 1:
            continue
        if len(body) == 1:
            return i, stmt, "pure"
        if calls_to(stmt, "tl.store"):
            return i, stmt, "writes"
        return None  # a branch that does other work before returning: not a shape we undo
    return None


@register
class WorkSkipping(AnchoredTransform):
    """Intent: return early from a kernel program whose work has a known result (Liger CE: a row whose label is
    ignore_index zeroes its gradient row and returns; vLLM / FlashAttention: programs past the valid range store
    zeros or return at once), so those programs skip the loads and math of the main path.

    Conditions: the skipped programs' result is known without the main path, and every required output of those
    programs is written on the exit path (or the main path, run under its masks, gives the same result). The
    probe that matters is `fully_masked_rows`: rows or tiles that the exit would skip.

    Failure: removing an exit that writes (kind "writes") loses those writes: the outputs of the skipped rows are
    whatever the main path produces for them, and where the main path masks them off, whatever `torch.empty`
    left in the buffer (garbage, differing from run to run). For ignore_index rows the main path also reads at
    the sentinel label (an out-of-bounds or wrong-class load). Removing a pure skip (kind "pure") is only safe
    when the main path's masks cover the skipped programs completely; otherwise they load and store out of
    bounds.

    Sites: the first top-level `if cond: ... return` of a @triton.jit function whose branch is a bare `return`
    (kind "pure") or stores before its final, only `return` (kind "writes"). Simplify: delete that statement,
    with the comments above it. Params: `exit` (its code), `leading` (the comment and blank lines above it),
    `index` (its position in the kernel body), `kind`. Optimize: a @triton.jit function without such an exit;
    the exit is put back at `index` (no default: the predicate is the expert's)."""

    id = "work_skipping"
    family = 16
    tag = "S"
    cost = 4
    conditions = ("fully_masked_rows",)
    intent = "return early from programs whose result is known, skipping their loads and math"
    forward_rank = 3

    def expert_anchors(self, module: Module):
        found = []
        for fn in module.functions():
            exit_ = _early_exit(fn) if is_jit(fn) else None
            if exit_ is not None:
                i, stmt, kind = exit_
                found.append(
                    (fn, {"exit": statement_code(stmt), "leading": leading_comments(stmt), "index": i, "kind": kind})
                )
        return found

    def simple(self, node, params):
        body = list(node.body.body)
        del body[params["index"]]
        return node.with_changes(body=node.body.with_changes(body=body))

    def plain_anchors(self, module: Module):
        return [(fn, {}) for fn in module.functions() if is_jit(fn) and _early_exit(fn) is None]

    def optimized(self, node, params):
        body = list(node.body.body)
        index = int(params["index"])
        if not 0 <= index <= len(body):
            raise ValueError(f"work_skipping: index {index} outside a body of {len(body)} statements")
        stmt = cst.parse_statement(params["exit"])
        body.insert(index, stmt.with_changes(leading_lines=leading_lines(params.get("leading", []))))
        return node.with_changes(body=node.body.with_changes(body=body))
