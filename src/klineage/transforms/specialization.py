"""Family 29: `@triton.jit(do_not_specialize=[...])` against plain `@triton.jit`."""

from __future__ import annotations

import ast

import libcst as cst

from klineage.launch_config import kernel_def
from klineage.transform import NodeTransform, Site, constexpr_params, dotted, node_code, register
from klineage.transforms.launch_knobs import append_kwargs, drop_trailing, trailing_kwargs

JIT = ("triton.jit", "jit")
KNOBS = ("do_not_specialize", "do_not_specialize_on_alignment")


@register
class Specialization(NodeTransform):
    """Intent: `do_not_specialize` stops Triton from compiling a new variant for each distinct value class of the
    named arguments (integers equal to 1, divisible by 16), so a kernel whose argument (a sequence length T, eps,
    a step counter) changes on every call compiles once instead of once per value class: no recompile latency
    spikes, no bloated cache.

    Expert form: `@triton.jit(do_not_specialize=[...])` (and/or do_not_specialize_on_alignment=[...]), those
    keywords last. Simple form: `@triton.jit` (or `@triton.jit(...)` with the other keywords, e.g. debug=).
    Params: each keyword's list as source text; optimize appends them again (there is no default: which
    arguments to exclude is the expert's choice).

    Conditions: what do_not_specialize gives up is the divisible-by-16 (and ==1) specialization: when the named
    arguments are 16-aligned pointers, strides or sizes (aligned_16), the specialized kernel can vectorize and
    drop multiplies, and the unspecialized one cannot.

    Failure: never a wrong result. Adding do_not_specialize on an aligned argument makes loads scalar or
    narrower (slower); removing it on an argument that takes many values recompiles whenever its value class
    changes (first-call latency spikes, a cache entry per variant)."""

    id = "specialization"
    family = 29
    tag = "M"
    cost = 3
    conditions = ("aligned_16",)
    intent = "keep a fast-changing argument out of specialization so the kernel is compiled once"
    node_type = cst.Decorator
    forward_rank = 4
    interpreter_blind = "the interpreter does not specialize arguments"

    def expert(self, node):
        call = node.decorator
        if not isinstance(call, cst.Call) or dotted(call.func) not in JIT:
            return None
        n = trailing_kwargs(call, frozenset(KNOBS))
        if n == 0 or any(a.star for a in call.args):
            return None
        return {a.keyword.value: node_code(a.value) for a in call.args[len(call.args) - n :]}

    def simple(self, node, params):
        call = drop_trailing(node.decorator, trailing_kwargs(node.decorator, frozenset(KNOBS)))
        return node.with_changes(decorator=call if call.args else call.func)

    def plain(self, node):
        expr = node.decorator
        if isinstance(expr, cst.Call):
            if dotted(expr.func) not in JIT or any(
                a.keyword is not None and a.keyword.value in KNOBS or a.star for a in expr.args
            ):
                return None
            return {}
        return {} if dotted(expr) in JIT else None

    def optimized(self, node, params):
        values = {k: v for k, v in params.items() if k in KNOBS}
        if not values:
            raise KeyError("do_not_specialize")
        expr = node.decorator
        call = expr if isinstance(expr, cst.Call) else cst.Call(func=expr)
        return node.with_changes(decorator=append_kwargs(call, values))

    # -- the forward walk's hooks ---------------------------------------------------------------------------

    def carry(self, expert: dict, source: str, site: Site) -> dict | None:
        """The expert's names that are run-time arguments of this kernel too; None where none is. Triton ignores a
        name the kernel does not have (and a position names another kernel's argument): FlagGems weight norm's
        `["eps"]`, set on seven FlagGems kernels without an `eps` (std, cumsum, index_select, vector_norm, diag, mv,
        bmm), spent an evaluation each in one H100 bench, a no-op at x0.996-x1.001 where timed
        (RESULTS.md#wild-h100-3)."""
        kernel = kernel_def(source, site.function)
        if kernel is None:
            return None
        arguments = {p.name.value for p in kernel.params.params} - constexpr_params(kernel)
        out = {}
        for key in KNOBS:
            try:
                listed = ast.literal_eval(expert.get(key, "[]"))
            except (ValueError, SyntaxError):
                continue
            kept = [n for n in listed if isinstance(n, str) and n in arguments] if isinstance(listed, list) else []
            if kept:
                out[key] = repr(kept)
        return out or None

    def variants(self, carried: dict, source: str, kernel: str | None, launches: list[dict] | None) -> list[dict]:
        """The names as carried, or nothing: there is no default name to exclude, nor a neighbour of one."""
        return [carried] if carried else []
