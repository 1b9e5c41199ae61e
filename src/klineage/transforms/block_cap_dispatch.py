"""Family 8: whole-row tile vs looped tile, with a block cap (host side)."""

from __future__ import annotations

import libcst as cst

from klineage.transform import dotted, node_code, register
from klineage.transforms._anchored import AnchoredTransform, Module, kernel_param_for, launches, names_in

FIXED_BLOCK = 1024  # moderate: a few registers per thread at 4-8 warps, any dtype


def _capped(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The cap of `min(CAP, triton.next_power_of_2(n))` (either order), else None."""
    if not isinstance(value, cst.Call) or dotted(value.func) != "min" or len(value.args) != 2:
        return None
    if any(a.keyword is not None or a.star for a in value.args):
        return None
    pow2 = [
        a.value
        for a in value.args
        if isinstance(a.value, cst.Call) and dotted(a.value.func) in ("triton.next_power_of_2", "next_power_of_2")
    ]
    if len(pow2) != 1:
        return None
    return next(a.value for a in value.args if a.value is not pow2[0])


def _looping_params(kernel: cst.FunctionDef) -> set[str]:
    """Parameters that step a `for ... in range(...)` / `tl.range(...)` loop of the kernel."""
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            it = node.iter
            if isinstance(it, cst.Call) and dotted(it.func) in ("range", "tl.range", "tl.static_range"):
                if len(it.args) == 3 and it.args[2].keyword is None:
                    found.update(names_in(it.args[2].value))

    kernel.visit(V())
    return found


def _feeds_looped_kernel(module: Module, assign: cst.Assign, name: str) -> bool:
    """`name` is passed, later in the same function, to a kernel of this module that loops over its columns with
    it as the step: the cap then only changes the tile, not what is computed."""
    fn = module.enclosing(assign)
    if fn is None:
        return False
    kernels = module.kernels()
    for call in launches(fn):
        kernel = kernels.get(call.func.value.value)
        if kernel is None or module.line(call) <= module.line(assign):
            continue
        for arg in call.args:
            if isinstance(arg.value, cst.Name) and arg.value.value == name:
                if kernel_param_for(kernel, call, arg) in _looping_params(kernel):
                    return True
    return False


def _assigns(module: Module):
    for node in module.positions:
        if (
            isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and module.enclosing(node) is not None
        ):
            yield node, node.targets[0].target.value


@register
class BlockCapDispatch(AnchoredTransform):
    """Intent: size the column tile to the row, `BLOCK = min(MAX_FUSED_SIZE, triton.next_power_of_2(n))`, so a
    row that fits is handled in one pass of a looped kernel (one HBM read per row) and wider rows loop over
    capped tiles (Liger cross_entropy, kl_div; the cap bounds register use and the 2**20-element tensor limit).

    Conditions: the kernel loops over the columns with the block as its step (checked), so every block size
    computes the same values; the masks cover a block that is larger than the row, or a row that is not a
    multiple of the block; the chosen tile (and any staging of it) fits in registers and shared memory.

    Failure: a kernel that does not mask its last, partial tile reads and writes past the row when n is not a
    multiple of the block (out of bounds; the fixed block of the simplified program exposes this first); a cap
    above what the kernel can hold spills registers or fails to compile (more than 2**20 elements, shared memory
    exceeded). With a single-tile kernel (no loop) a fixed block would silently truncate rows; those are not
    sites.

    Sites: a host assignment `B = min(CAP, triton.next_power_of_2(n))` (either order), B passed later in the same
    function to a kernel of this module that steps a `for` loop by that parameter. Simplify: `B = 1024` (or the
    cap, when it is a smaller literal). Params: `value` (the expert's right-hand side), `cap`. Optimize: a host
    `B = <int>` passed the same way; puts `value` back (no default)."""

    id = "block_cap_dispatch"
    family = 8
    tag = "S"
    cost = 3
    conditions = ("divisible_by_block", "shared_memory_fits")
    intent = "size the column tile to the row (capped) instead of a fixed moderate tile"
    forward_rank = 2

    def expert_anchors(self, module: Module):
        found = []
        for node, name in _assigns(module):
            cap = _capped(node.value)
            if cap is not None and _feeds_looped_kernel(module, node, name):
                found.append((node, {"value": node_code(node.value), "cap": node_code(cap)}))
        return found

    def simple(self, node, params):
        block = FIXED_BLOCK
        if params["cap"].isdigit():
            block = min(block, int(params["cap"]))
        return node.with_changes(value=cst.Integer(str(block)))

    def plain_anchors(self, module: Module):
        return [
            (node, {})
            for node, name in _assigns(module)
            if isinstance(node.value, cst.Integer) and _feeds_looped_kernel(module, node, name)
        ]

    def optimized(self, node, params):
        return node.with_changes(value=cst.parse_expression(params["value"]))
