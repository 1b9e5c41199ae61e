"""Expression helpers shared by the hint, cast and math families (cache_hints, alignment_hints, assume_hints,
int64_offsets, static_range, fast_math, exp2_folded_scale, scalar_dtype_pin, fp32_upcast, dot_precision). Not a
family: registers nothing. The matchers here look inside @triton.jit functions only."""

from __future__ import annotations

import libcst as cst

from klineage.transform import broadcasts, dotted, node_code
from klineage.transforms._anchored import Module, is_jit, names_in, nodes_under

# Operators that bind looser than attribute access and calls: such an expression needs parentheses before `.to(`.
_LOOSE = (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda)
INT_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)
LOG2E = 1.4426950408889634
EXP2 = {"tl.exp2": "tl.exp", "tl.math.exp2": "tl.math.exp"}  # base-2 exponentials and their natural-base twins
LOOP_RANGES = ("range", "tl.range")  # loops over a range a transform may read the bounds of
# Names in a kernel expression that are never one of the kernel's values: modules, literals' helpers, constants.
NOT_VALUES = frozenset({"tl", "triton", "None", "True", "False", "float", "int"})


def kernel_nodes(module: Module, node_type: type) -> list:
    """Nodes of `node_type` inside @triton.jit functions."""
    found = []
    for node in module.positions:
        if isinstance(node, node_type):
            fn = module.enclosing(node)
            if fn is not None and is_jit(fn):
                found.append(node)
    return found


def is_log2e_value(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Call) and dotted(node.func) == "tl.constexpr" and len(node.args) == 1:
        node = node.args[0].value
    return isinstance(node, cst.Float) and abs(float(node.value) - LOG2E) < 1e-7


def log2e_names(module: Module) -> set[str]:
    """Module-level constants equal to log2(e): `LOG2E = 1.44269...` or `LOG2_E = tl.constexpr(1.44269...)`."""
    names = set()
    for stmt in module.tree.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target, value = small.target, small.value
            else:
                continue
            if isinstance(target, cst.Name) and is_log2e_value(value):
                names.add(target.value)
    return names


def plain_call(node: cst.CSTNode, names: set[str] | tuple[str, ...], nargs: int | None = None) -> bool:
    """A call to one of `names` with no star arguments (and exactly `nargs` positional ones, no keywords, if given)."""
    if not isinstance(node, cst.Call) or dotted(node.func) not in names or any(a.star for a in node.args):
        return False
    return nargs is None or (len(node.args) == nargs and all(a.keyword is None for a in node.args))


def cast_parts(node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(receiver, dtype) of `receiver.to(dtype)` with one positional argument and nothing else; None otherwise."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or node.func.attr.value != "to":
        return None
    if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
        return None
    return node.func.value, node.args[0].value


def cast_of(node: cst.CSTNode, dtype: str) -> cst.BaseExpression | None:
    """The receiver of `receiver.to(<dtype>)` (one positional argument, nothing else); None otherwise."""
    parts = cast_parts(node)
    return parts[0] if parts is not None and dotted(parts[1]) == dtype else None


def is_cast_receiver(module: Module, node: cst.CSTNode) -> bool:
    """`node` is already the receiver of some `.to(...)` call."""
    parent = module.parents.get(node)
    return (
        isinstance(parent, cst.Attribute)
        and parent.value is node
        and parent.attr.value == "to"
        and isinstance(module.parents.get(parent), cst.Call)
    )


def strip_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=(), rpar=()) if getattr(node, "lpar", None) else node


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    """`node` with one pair of parentheses if it binds looser than a call or attribute and has none."""
    if isinstance(node, _LOOSE) and not node.lpar:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


def make_cast(node: cst.BaseExpression, dtype: str) -> cst.Call:
    """`node.to(<dtype>)`, parenthesizing the receiver where precedence needs it."""
    attr = cst.Attribute(value=parenthesized(node), attr=cst.Name("to"))
    return cst.Call(func=attr, args=[cst.Arg(cst.parse_expression(dtype))])


def call_with(func: str, *args: cst.BaseExpression) -> cst.Call:
    """`func(a, b, ...)` in the usual formatting (", " between arguments)."""
    comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    items = [cst.Arg(a, comma=comma if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT) for i, a in enumerate(args)]
    return cst.Call(func=cst.parse_expression(func), args=items)


def is_value_use(module: Module, node: cst.Name) -> bool:
    """A Name read as a value: not an assignment or loop target, a parameter, a keyword, an attribute name or the
    receiver of an attribute (e.g. `x.to`, `x.dtype`)."""
    parent = module.parents.get(node)
    if isinstance(parent, cst.Attribute):
        return False  # x.attr (receiver) or obj.x (attribute name)
    if isinstance(parent, cst.Arg) and parent.keyword is node:
        return False
    if isinstance(parent, cst.Param | cst.AssignTarget | cst.ImportAlias):
        return False
    if isinstance(parent, cst.AugAssign | cst.For | cst.AnnAssign) and parent.target is node:
        return False
    if isinstance(parent, cst.FunctionDef | cst.ClassDef | cst.Decorator):
        return False
    if isinstance(parent, cst.Element | cst.Tuple | cst.List):
        # tuple unpacking targets: (a, b) = ... ; walk up to see whether this tuple is a target
        up = parent
        while isinstance(up, cst.Element | cst.Tuple | cst.List):
            up = module.parents.get(up)
        if isinstance(up, cst.AssignTarget | cst.For):
            return False
    return True


INDEX_CALLS = ("tl.program_id", "tl.arange", "tl.num_programs")


def int_like(node: cst.BaseExpression, calls: tuple[str, ...] = INDEX_CALLS) -> bool:
    """An integer index expression by form: names, integer literals, calls in `calls`, combined by + - * // %."""
    if isinstance(node, cst.Name | cst.Integer):
        return True
    if isinstance(node, cst.Call):
        return dotted(node.func) in calls and not any(a.star for a in node.args)
    if isinstance(node, cst.BinaryOperation):
        return isinstance(node.operator, INT_OPS) and int_like(node.left, calls) and int_like(node.right, calls)
    return False


def assignments(fn: cst.FunctionDef, augmented: bool = True) -> list[tuple[str, cst.BaseExpression]]:
    """(name, value) of every assignment to a plain name in the function, in source order; with `augmented`,
    `name += value` too."""
    found = []
    for node in nodes_under(fn.body, (cst.Assign, cst.AugAssign) if augmented else cst.Assign):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        found += [(t.value, node.value) for t in targets if isinstance(t, cst.Name)]
    return found


def wide_names(fn: cst.FunctionDef) -> set[str]:
    """Names a kernel binds to values of more than one dimension, as far as its text shows: an assignment whose value
    broadcasts (`[:, None]`, `[None, :]`), makes a block from a shape list (`tl.zeros([BM, BN], ...)`), or uses a
    name already wide (`inp + rows * N` after `rows = ... [:, None]`). Too many is safe; a hint asserted with one
    value on such a value is a compile error ("Shape of input to multiple_of does not match the length of
    values"). A name rebound later keeps the widest it was."""
    made = assignments(fn)
    bound = [(name, names_in(value)) for name, value in made]
    wide = {name for name, value in made if broadcasts(node_code(value)) or _makes_block(value)}
    grew = True
    while grew:
        grew = False
        for name, used in bound:
            if name not in wide and used & wide:
                wide.add(name)
                grew = True
    return wide


def _makes_block(value: cst.BaseExpression) -> bool:
    """`tl.zeros([BM, BN], ...)`, `tl.full((BM, BN), ...)`: a block of two dimensions or more from a shape."""
    if not (isinstance(value, cst.Call) and dotted(value.func) in ("tl.zeros", "tl.full", "tl.ones") and value.args):
        return False
    shape = value.args[0].value
    return isinstance(shape, cst.List | cst.Tuple) and len(shape.elements) > 1


def single_name_assign_value(module: Module, node: cst.CSTNode) -> bool:
    """`node` is the whole value of `name = node` (one target, a plain name)."""
    parent = module.parents.get(node)
    return (
        isinstance(parent, cst.Assign)
        and parent.value is node
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    )


class StatementSites:
    """Mixin for AnchoredTransform families whose simple form is a bare name (`eps`, `x`): such a name occurs many
    times in a kernel, so a site's `before`/`after` show the whole enclosing statement with the rewrite applied
    (e.g. `m = dY_row.to(tl.float32)` / `m = dY_row`), which lets `matching_optimize_site` tell the occurrences
    apart. The rewrite itself still replaces only the anchor."""

    def shown(self, module: Module, node: cst.CSTNode, after: cst.CSTNode) -> tuple[str, str]:
        stmt = node
        while stmt is not None and not isinstance(stmt, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            stmt = module.parents.get(stmt)
        if isinstance(stmt, cst.SimpleStatementLine):
            shown = stmt.with_changes(leading_lines=())
            return node_code(shown), node_code(shown.deep_replace(node, after))
        return super().shown(module, node, after)
