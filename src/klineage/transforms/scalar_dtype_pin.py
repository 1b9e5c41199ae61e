"""Family 26: scalar-argument dtype pinning (`eps.to(tl.float32)` on scalar kernel parameters)."""

from __future__ import annotations

import re

import libcst as cst

from klineage.launch_config import kernel_def, kernel_rows
from klineage.transform import dotted, register
from klineage.transforms._anchored import AnchoredTransform, Module, names_in
from klineage.transforms._kernel_exprs import (
    StatementSites,
    assignments,
    cast_of,
    is_cast_receiver,
    is_value_use,
    kernel_nodes,
    make_cast,
)

FP32 = "tl.float32"
ACCESSES = (
    "tl.load",
    "tl.store",
    "tl.atomic_add",
    "tl.atomic_max",
    "tl.atomic_min",
    "tl.atomic_cas",
    "tl.atomic_xchg",
    "tl.make_block_ptr",
)
# Names that are integers (sizes, strides, indices) by convention: never offered a float32 pin.
_INT_NAME = re.compile(r"(stride|numel|^n_|^num|_num$|^n[A-Z]|size|^len|_len$|_idx$|^idx|^[A-Z]$|^[A-Z]_)", re.I)


def _leftmost(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.BinaryOperation):
        node = node.left
    return node


def scalar_params(fn: cst.FunctionDef) -> set[str]:
    """Parameters of a kernel that are runtime scalars: not annotated (a constexpr or anything else), not named like
    a pointer, and not used like one (the base of a load/store address, `p.dtype`, or advanced with `p += ...`), nor
    added into an address (an offset such as rope's `half` in `x_vec + half + offs` is an integer: pinned to fp32
    it made a float pointer offset, a compile error that cost two evaluations on the H200: RESULTS.md#run-5)."""
    names = {p.name.value for p in fn.params.params if p.annotation is None}
    names = {n for n in names if not n.lower().endswith("ptr") and not n.lower().startswith("ptr")}
    pointers: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if dotted(call.func) in ACCESSES and call.args:
                base = _leftmost(call.args[0].value)
                if isinstance(base, cst.Name):
                    pointers.add(base.value)
                if dotted(call.func) != "tl.make_block_ptr":  # in an address: a pointer or an integer offset
                    pointers.update(names_in(call.args[0].value))

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if isinstance(node.value, cst.Name) and node.attr.value in ("dtype", "element_ty"):
                pointers.add(node.value.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                pointers.add(node.target.value)

    fn.body.visit(V())
    # an address made in a local first (`inp_ptrs = inp + offset`, then `tl.load(inp_ptrs)`: FlagGems's reductions
    # all do) makes what it was made of pointers or offsets too: pinned, `inp.to(tl.float32) + offset` failed to
    # compile on every FlagGems max/min/argmax candidate that had it (RESULTS.md#wild-h100)
    bound = [(name, names_in(value)) for name, value in assignments(fn, augmented=False)]
    grew = True
    while grew:
        grew = False
        for name, made_of in bound:
            if name in pointers and not made_of <= pointers:
                pointers.update(made_of)
                grew = True
    return names - pointers


@register
class ScalarDtypePin(StatementSites, AnchoredTransform):
    """Intent: `eps = eps.to(tl.float32)` on a scalar kernel argument pins its dtype, so the row math stays in fp32
    whatever dtype the launcher passed. Undo: `eps` (so `eps = eps.to(tl.float32)` becomes `eps = eps`).
    A scalar argument is a parameter of the @triton.jit function with no annotation (constexprs are annotated),
    not named like a pointer and not used like one (the base of a load/store address, `.dtype`, `+=`). The simple
    names that look like integers (strides, sizes, indices; a name heuristic) are left alone both ways: there
    `.to(tl.float32)` is a real conversion, not a pin.

    Conditions: eager launches pass Python floats as fp32 and are unaffected; the pin matters when the kernel is
    also launched from inside torch.compile, where Inductor passes fp64 scalars.

    Failure: without the pin, a torch.compile launch promotes the whole expression chain to fp64: about 2x slower
    (Liger swiglu: 108us vs 56us at 8192x3072 on H100), on that launch path only; results stay within tolerance."""

    id = "scalar_dtype_pin"
    family = 26
    tag = "M"
    cost = 2
    conditions = ("torch_compile_launch",)
    intent = "pinning scalar arguments to fp32 keeps fp64 scalars from torch.compile out of the math"
    forward_rank = 4

    def expert_anchors(self, module: Module):
        found = []
        for call in kernel_nodes(module, cst.Call):
            inner = cast_of(call, FP32)
            if (
                isinstance(inner, cst.Name)
                and not inner.lpar
                and not _INT_NAME.search(inner.value)
                and inner.value in module.once(module.enclosing(call), scalar_params)
            ):
                found.append((call, {"dtype": FP32}))
        return found

    def plain_anchors(self, module: Module):
        found = []
        for name in kernel_nodes(module, cst.Name):
            fn = module.enclosing(name)
            if (
                is_value_use(module, name)
                and not is_cast_receiver(module, name)
                and not _INT_NAME.search(name.value)
                and name.value in module.once(fn, scalar_params)
            ):
                found.append((name, {}))
        return found

    def simple(self, node: cst.Call, params: dict) -> cst.Name:
        return cast_of(node, FP32)

    def optimized(self, node: cst.Name, params: dict) -> cst.Call:
        return make_cast(node, params["dtype"])

    def default_params(self) -> dict:
        return {"dtype": FP32}

    def untimed(self, source: str, site, launches: list[dict] | None) -> str:
        """Why the bench case would run the same code: every launch of the kernel there passes each scalar argument
        of the site's statement a Python float, which Triton types fp32, so the pin compiles to the same SASS (an
        `eps` pinned or not: identical with Triton 3.6's sm_90 compiler; different for an fp64 `eps`). It pays only
        where a launcher passes fp64 (Inductor's). '' where a launch passes anything else, or none was seen. In one
        H100 bench KLineage and blind gated the pin 12 times on six FlagGems kernels (`eps` of layer, weight, RMS and
        group norm among them), x0.994-x1.008 (RESULTS.md#wild-h100-3)."""
        rows = kernel_rows(launches, site.function)
        fn = kernel_def(source, site.function)
        if not rows or fn is None:
            return ""
        try:
            stmt = cst.parse_statement(site.before)
        except cst.ParserSyntaxError:
            return ""
        used = {n for n in names_in(stmt) & scalar_params(fn) if not _INT_NAME.search(n)}
        if not used or not all(used <= set(r.get("floats", ())) for r in rows):
            return ""
        named = ", ".join(sorted(used))
        return (
            f"the bench case passes {named} to {site.function} as a Python float, which Triton types fp32: pinned to "
            "fp32, the kernel compiles to the same code"
        )
