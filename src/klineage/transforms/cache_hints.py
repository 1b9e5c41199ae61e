"""Family 1: cache / eviction hints on tl.load and tl.store."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register, with_kwargs, without_kwargs
from klineage.transforms._anchored import AnchoredTransform, Module
from klineage.transforms._kernel_exprs import kernel_nodes

HINTS = ("eviction_policy", "cache_modifier")
ACCESSES = ("tl.load", "tl.store")


@register
class CacheHints(AnchoredTransform):
    """Intent: steer L1/L2 residency: `eviction_policy="evict_first"|"evict_last"` and
    `cache_modifier=".ca"|".cg"|".cs"|".wb"` on `tl.load` / `tl.store` (data streamed once vs data other programs
    re-read, outputs never re-read).

    Conditions: a hint is a pure performance hint, so no input property makes deleting or adding one wrong, with one
    exception: `.cg` on partial tiles that programs hand to each other through spin locks (stream-K) bypasses a
    non-coherent L1, and no name in CONDITIONS describes cross-program handoffs. The vocabulary worth probing is the
    one that changes which lines the hinted accesses touch: non-contiguous inputs (strided rows defeat the reuse the
    hint plans for) and rows or tiles that are entirely masked (a hinted masked load must still honour mask/other).

    Failure: a wrong or missing hint costs only L2 reuse (slower, never different results), except deleting `.cg`
    in a stream-K handoff, which can read stale partial tiles: wrong results."""

    id = "cache_hints"
    family = 1
    tag = "M"
    cost = 1
    conditions = ("cross_program_handoff", "contiguous", "fully_masked_rows")
    intent = "cache/eviction hints on loads and stores keep re-read data in L2 and stream the rest"
    interpreter_blind = "the interpreter ignores cache and eviction modifiers"

    def expert_anchors(self, module: Module):
        found = []
        for call in kernel_nodes(module, cst.Call):
            if dotted(call.func) not in ACCESSES or any(a.star for a in call.args):
                continue
            hints = [a for a in call.args if a.keyword is not None and a.keyword.value in HINTS]
            # Only trailing hints: deleting and re-appending them must give back the same argument order.
            if not hints or any(a is not b for a, b in zip(call.args[-len(hints) :], hints)):
                continue
            found.append((call, {a.keyword.value: node_code(a.value) for a in hints}))
        return found

    def plain_anchors(self, module: Module):
        return [
            (call, {})
            for call in kernel_nodes(module, cst.Call)
            if dotted(call.func) in ACCESSES
            and not any(a.star for a in call.args)
            and not any(a.keyword is not None and a.keyword.value in HINTS for a in call.args)
        ]

    def simple(self, node: cst.Call, params: dict) -> cst.Call:
        call = without_kwargs(node, set(HINTS))
        if call.args and _multiline(node):
            # Keep the call's layout: the new last argument takes the deleted one's comma (trailing comma, newline,
            # comment) so that re-adding the hints can give back the same text.
            call = call.with_changes(args=[*call.args[:-1], call.args[-1].with_changes(comma=node.args[-1].comma)])
        return call

    def optimized(self, node: cst.Call, params: dict) -> cst.Call:
        hints = {k: v for k, v in params.items() if k in HINTS}  # in the expert's order
        if not hints:
            raise KeyError("cache_hints: no hint given")
        if not node.args or not _multiline(node):
            return with_kwargs(node, hints)
        # One argument per line: each hint on its own line, indented like the arguments before it.
        last = node.args[-1].comma
        between = node.args[-2].comma if len(node.args) >= 2 and isinstance(node.args[-2].comma, cst.Comma) else last
        args = [*node.args[:-1], node.args[-1].with_changes(comma=between)]
        for i, (name, code) in enumerate(hints.items()):
            args.append(
                cst.Arg(
                    value=cst.parse_expression(code),
                    keyword=cst.Name(name),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                    comma=last if i == len(hints) - 1 else between,
                )
            )
        return node.with_changes(args=args)

    def default_params(self) -> dict:
        return {"eviction_policy": '"evict_last"'}


def _multiline(call: cst.Call) -> bool:
    """The call ends with a trailing comma followed by a line break: one argument per line."""
    comma = call.args[-1].comma if call.args else None
    return isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
