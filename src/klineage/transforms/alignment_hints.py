"""Family 2: alignment / contiguity hints (`tl.multiple_of`, `tl.max_contiguous`) on index values."""

from __future__ import annotations

import re

import libcst as cst

from klineage.carry import code_names, literal_int, undefined_names
from klineage.transform import Site, dotted, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module, names_in
from klineage.transforms._kernel_exprs import (
    call_with,
    int_like,
    kernel_nodes,
    single_name_assign_value,
    wide_names,
)

WRAPPERS = ("tl.multiple_of", "tl.max_contiguous")


def _unwrap(node: cst.BaseExpression) -> tuple[cst.BaseExpression, list[list[str]]]:
    """Peel a nest of hint calls: the innermost value and the wrappers, outermost first, as [function, bound]."""
    chain = []
    while (
        isinstance(node, cst.Call)
        and dotted(node.func) in WRAPPERS
        and len(node.args) == 2
        and all(a.keyword is None and not a.star for a in node.args)
    ):
        chain.append([dotted(node.func), node_code(node.args[1].value)])
        node = node.args[0].value
    return node, chain


@register
class AlignmentHints(AnchoredTransform):
    """Intent: `x = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)` tells the compiler the offsets start at
    a multiple of BLOCK and run contiguously, which unlocks 128-bit vectorized loads and stores.

    Conditions: the asserted divisibility and contiguity hold on every launch: the offsets (hence the sizes and
    block starts they come from) are multiples of the bound, the data is contiguous along them, and the base
    pointers and strides are 16-byte aligned so a vector access never straddles an alignment boundary.
    Matched only where the hint nest is the whole value of `name = ...` in a @triton.jit function and the wrapped
    value is an integer index expression; hints inside larger expressions are left alone.

    Failure: a false assertion makes the compiler emit misaligned vector accesses: a misaligned-address fault or
    silently wrong data. Removing a hint is always safe; it only costs vector width."""

    id = "alignment_hints"
    family = 2
    tag = "M"
    cost = 1
    conditions = ("aligned_16", "contiguous", "divisible_by_block")
    intent = "multiple_of/max_contiguous hints let the compiler vectorize loads and stores"
    interpreter_blind = "tl.multiple_of / tl.max_contiguous are no-ops in the interpreter"

    def misfit(self, expert: dict, source: str, site: Site, kernel: str | None) -> tuple[str, str] | None:
        """Why an expert's alignment hint cannot be carried to this site, or None. `tl.multiple_of(x, BLOCK_M)`
        claims x is a multiple of BLOCK_M: here that bound must exist, and the value must be built from it
        (`pid * BLOCK`, `tl.arange(0, BLOCK)`), or the claim is unfounded: the attention expert's hints had landed
        on `pid = tl.program_id(0)` with a `BLOCK_M` the kernel did not define."""
        for fn, bound in expert.get("hints", []):
            if literal_int(bound) is not None:
                continue  # a number: whether it holds is the conditions' question (divisible_by_block, aligned_16)
            names = code_names(str(bound))
            if missing := undefined_names(names, source):
                why = f"the expert's bound {bound} names {', '.join(missing)}, which this program does not define"
                return "divisible_by_block", why
            if not any(re.search(rf"\b{re.escape(n)}\b", site.before) for n in names):
                why = f"{site.before.strip()[:60]} is not built from {bound}: {fn} would claim what nothing shows"
                return "divisible_by_block", why
        return None

    def expert_anchors(self, module: Module):
        found = []
        for call in kernel_nodes(module, cst.Call):
            if dotted(call.func) not in WRAPPERS or not single_name_assign_value(module, call):
                continue
            inner, chain = _unwrap(call)
            if chain and int_like(inner):
                found.append((call, {"hints": chain}))
        return found

    def plain_anchors(self, module: Module):
        """Index values of one dimension only: one bound on a block of two is a compile error (FlagGems's amax,
        `inp = inp + rows * N` with `rows` a column, failed so on the H100: RESULTS.md#wild-h100)."""
        found = []
        for node in kernel_nodes(module, cst.BaseExpression):
            if single_name_assign_value(module, node) and int_like(node) and not isinstance(node, cst.Integer):
                if not (names_in(node) & module.once(module.enclosing(node), wide_names)):
                    found.append((node, {}))
        return found

    def simple(self, node: cst.Call, params: dict) -> cst.BaseExpression:
        return _unwrap(node)[0]

    def optimized(self, node: cst.BaseExpression, params: dict) -> cst.BaseExpression:
        hints = params["hints"]
        if not hints or any(fn not in WRAPPERS for fn, _ in hints):
            raise ValueError(f"alignment_hints: bad hints {hints!r}")
        for fn, bound in reversed(hints):  # innermost wrapper first
            node = call_with(fn, node, cst.parse_expression(bound))
        return node

    def default_params(self) -> dict:
        return {"hints": [["tl.multiple_of", "16"]]}
