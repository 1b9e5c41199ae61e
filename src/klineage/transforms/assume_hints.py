"""Family 2 (second form): `tl.assume(...)` statements that guide the compiler's integer analysis."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module, is_jit


def _assumption(stmt: cst.CSTNode) -> str | None:
    """The condition of a statement line `tl.assume(cond)`, as source text; None for anything else."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Expr):
        return None
    call = stmt.body[0].value
    if (
        isinstance(call, cst.Call)
        and dotted(call.func) == "tl.assume"
        and len(call.args) == 1
        and call.args[0].keyword is None
        and not call.args[0].star
    ):
        return node_code(call.args[0].value)
    return None


def _leading(stmt: cst.SimpleStatementLine) -> list[list[str]]:
    """The comment lines above a statement (blank lines as ""), as an optional third element of a fact."""
    lines = [line.comment.value if line.comment else "" for line in stmt.leading_lines]
    return [lines] if lines else []


@register
class AssumeHints(AnchoredTransform):
    """Intent: `tl.assume(pid_m >= 0)`, `tl.assume(stride_am > 0)` at the top of a kernel let the compiler's integer
    analysis prove offsets non-negative and in range, which simplifies address arithmetic and enables wider
    accesses. One site per kernel: all `tl.assume` statements directly in its body.

    Conditions: every assumed fact holds on every launch; in practice they are about strides and offsets being
    positive, aligned and divisible, hence the same vocabulary as the alignment hints.

    Failure: a false assumption is undefined behaviour for the compiler: address arithmetic simplified on a false
    premise gives wrong addresses (faults or silently wrong data). Removing assumptions is always safe."""

    id = "assume_hints"
    family = 2
    tag = "M"
    cost = 1
    conditions = ("aligned_16", "contiguous", "divisible_by_block")
    intent = "tl.assume facts let integer analysis simplify address arithmetic"
    interpreter_blind = "tl.assume is a no-op in the interpreter"

    def _kernels(self, module: Module):
        return [f for f in module.functions() if is_jit(f) and isinstance(f.body, cst.IndentedBlock)]

    def expert_anchors(self, module: Module):
        found = []
        for fn in self._kernels(module):
            body = fn.body.body
            facts = [[i, cond, *_leading(s)] for i, s in enumerate(body) if (cond := _assumption(s)) is not None]
            if facts and len(facts) < len(body):  # a body of assumptions only would be left empty
                found.append((fn, {"assume": facts}))
        return found

    def plain_anchors(self, module: Module):
        return [(fn, {}) for fn in self._kernels(module) if not any(_assumption(s) for s in fn.body.body)]

    def simple(self, node: cst.FunctionDef, params: dict) -> cst.FunctionDef:
        body = [s for s in node.body.body if _assumption(s) is None]
        return node.with_changes(body=node.body.with_changes(body=body))

    def optimized(self, node: cst.FunctionDef, params: dict) -> cst.FunctionDef:
        body = list(node.body.body)
        # Indices are positions in the expert body: inserting in increasing order puts each one back in place.
        for index, cond, *leading in sorted(params["assume"], key=lambda f: f[0]):
            if not 0 <= index <= len(body):
                raise ValueError(f"assume_hints: position {index} outside the body")
            stmt = cst.parse_statement(f"tl.assume({cond})\n")
            texts = leading[0] if leading else []
            lines = [cst.EmptyLine(comment=cst.Comment(text) if text else None) for text in texts]
            body.insert(index, stmt.with_changes(leading_lines=lines))
        return node.with_changes(body=node.body.with_changes(body=body))
