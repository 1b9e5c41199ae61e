"""Family 8 (kernel side): a row held in one tile, dispatched at launch when it fits, instead of swept in tiles."""

from __future__ import annotations

import libcst as cst

from klineage.transform import broadcasts, constexpr_params, dotted, kwarg, node_code, register, with_kwargs
from klineage.transforms._anchored import (
    AnchoredTransform,
    Module,
    assignment,
    bound_in,
    calls,
    imported_modules,
    kernel_param_for,
    launch_statement,
    launches,
    leading_comments,
    names_in,
    statement_code,
)
from klineage.transforms.block_cap_dispatch import FIXED_BLOCK

# The widest row the generated dispatch holds in one tile: 65536 // 2 elements, Liger's cross-entropy cap ("less
# register spilling"; catalog family 8). At 32 warps that is 32 fp32 values per thread for each tile-wide value.
FUSED_CAP = 32768
TWIN = "_one_tile"
TILE, WARPS_NAME = "row_tile", "row_warps"  # the host names the generated dispatch binds
# Warps for a one-tile launch, by tile width: Liger's calculate_settings ladder (catalog family 9).
WARPS = "4 if {t} < 2048 else 8 if {t} < 8192 else 16 if {t} < 32768 else 32"


def _sweep(loop: cst.For, params: set[str], constexprs: set[str]) -> tuple[str, str] | None:
    """(n, B) for a column sweep `for s in range(0, n, B)` (or `tl.range`): n a run-time parameter, B a constexpr
    one, no `else`, and nothing in the body that leaves the loop or loops again."""
    it = loop.iter
    if not (
        isinstance(it, cst.Call)
        and dotted(it.func) in ("range", "tl.range")
        and isinstance(loop.target, cst.Name)
        and loop.orelse is None
    ):
        return None
    positional = [a.value for a in it.args if a.keyword is None and not a.star]
    if len(positional) != 3 or not (isinstance(positional[0], cst.Integer) and positional[0].value == "0"):
        return None
    n, step = positional[1], positional[2]
    if not (
        isinstance(n, cst.Name)
        and n.value in params - constexprs
        and isinstance(step, cst.Name)
        and step.value in constexprs
    ):
        return None
    if _contains(loop.body, (cst.Break, cst.Continue, cst.Return, cst.For, cst.While)):
        return None
    return n.value, step.value


def column_sweeps(kernel: cst.FunctionDef) -> tuple[list[cst.For], str, str] | None:
    """The sweeps of a 1-D row kernel whose every loop is a column sweep over the same width n and tile B:
    (loops, n, B); None for any other kernel (no loop, a loop of another kind, a 2-D tile or a `tl.dot`, whose
    loops are a GEMM's K loop rather than sweeps over a row)."""
    code = node_code(kernel)
    if broadcasts(code) or "tl.dot" in code:
        return None
    params = {p.name.value for p in kernel.params.params}
    constexprs = constexpr_params(kernel)
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


def _simple_expr(node: cst.BaseExpression) -> bool:
    """A width the host can test without side effects: names, attributes, subscripts, integers."""
    if isinstance(node, cst.Name | cst.Integer):
        return True
    if isinstance(node, cst.Attribute):
        return _simple_expr(node.value)
    if isinstance(node, cst.Subscript):
        return _simple_expr(node.value) and all(
            isinstance(s.slice, cst.Index) and _simple_expr(s.slice.value) for s in node.slice
        )
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


def _one_program(call: cst.Call) -> bool:
    """Whether the launch's grid is a literal single program: `(1,)`, `(1, 1)` or `1`."""
    grid = call.func.slice[0].slice.value if isinstance(call.func, cst.Subscript) else None
    items = [e.value for e in grid.elements] if isinstance(grid, cst.Tuple) else [grid]
    return all(isinstance(e, cst.Integer) and int(e.value, 0) == 1 for e in items)


def _sweepless(kernel: cst.FunctionDef) -> bool:
    return not _contains(kernel.body, (cst.For, cst.While))


def _contains(node: cst.CSTNode, kinds: tuple[type, ...]) -> bool:
    """Whether any node under `node` is of one of `kinds`."""
    found = []

    class V(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kinds):
                found.append(n)
            return not found

    node.visit(V())
    return bool(found)


def _dispatch(module: Module, node: cst.If) -> tuple[str, cst.SimpleStatementLine, dict] | None:
    """For `if cond: <one launch> else: <one launch>` where one kernel holds the row in one tile (no loop) and the
    other sweeps it: (the looped side, its launch statement, what `_looped_launch` read)."""
    if not isinstance(node.orelse, cst.Else) or not isinstance(node.body, cst.IndentedBlock):
        return None
    if not isinstance(node.orelse.body, cst.IndentedBlock):
        return None
    sides = {"body": node.body.body, "orelse": node.orelse.body.body}
    if any(len(stmts) != 1 or launch_statement(stmts[0]) is None for stmts in sides.values()):
        return None
    kernels = module.kernels()
    for side, other in (("body", "orelse"), ("orelse", "body")):
        looped, single = launch_statement(sides[side][0]), launch_statement(sides[other][0])
        one = kernels.get(single.func.value.value)
        found = _looped_launch(module, looped)
        if (
            found is not None
            and one is not None
            and one.name.value != found["kernel"]
            and _sweepless(one)
            and node_code(single.func.slice[0]) == node_code(looped.func.slice[0])
        ):
            return side, sides[side][0], found
    return None


def _with_kwarg(call: cst.Call, name: str, code: str) -> cst.Call:
    value = cst.parse_expression(code)
    if kwarg(call, name) is None:
        return with_kwargs(call, {name: code})
    return call.with_changes(
        args=[
            a.with_changes(value=value) if a.keyword is not None and a.keyword.value == name else a for a in call.args
        ]
    )


def one_tile_twin(kernel: cst.FunctionDef, exclusive: frozenset[str] = frozenset()) -> cst.FunctionDef:
    """The kernel with every column sweep run once at offset 0 (valid when its tile covers the row), and a value a
    later sweep recomputes with the very same statement kept from the first (`reused`). `exclusive`: the pointer
    parameters whose buffers no other argument can reach (see `_exclusive_params`)."""
    loops, _, _ = column_sweeps(kernel)
    targets = {id(loop) for loop in loops}

    class Unroll(cst.CSTTransformer):
        def leave_For(self, original_node, updated_node):
            if id(original_node) not in targets:
                return updated_node
            start = cst.parse_statement(f"{original_node.target.value} = 0")
            start = start.with_changes(leading_lines=updated_node.leading_lines)
            return cst.FlattenSentinel([start, *updated_node.body.body])

    lines = (
        cst.EmptyLine(),
        cst.EmptyLine(),
        cst.EmptyLine(
            comment=cst.Comment(
                "# One tile covers the row (launched only when it does): each sweep below "
                "runs once, and a value a later"
            )
        ),
        cst.EmptyLine(
            comment=cst.Comment(
                "# sweep would load again is kept from the first, so the row is read from "
                "memory once, not once per sweep."
            )
        ),
    )
    body = kernel.body.visit(Unroll())
    body = body.with_changes(body=one_load(reused(list(body.body), exclusive)))
    return kernel.with_changes(name=cst.Name(kernel.name.value + TWIN), body=body, leading_lines=lines)


MEMORY_WRITES = ("tl.store", "tl.atomic_")
NOT_PURE = (*MEMORY_WRITES, "volatile", "tl.inline_asm", "tl.debug_barrier", "tl.device_print", "tl.device_assert")


def reused(statements: list, exclusive: frozenset[str] = frozenset()) -> list:
    """Straight-line statements without those that rebind a name to the value it already holds: `t = E` again,
    with E the same code, nothing E reads rebound since, and no write in between that E's loads could see.
    Triton merges identical loads only while no store separates them; the residual layer norm stores its sum h
    between the sweeps, so each sweep read x and r again. A store to an `exclusive` buffer (one the host allocated
    for this argument alone) cannot change what a load of another buffer sees, so it does not stop the reuse."""
    held: dict[str, tuple[str, set[str]]] = {}  # name -> (the code it holds, the names that code reads)

    def forget(names: set[str]) -> None:
        for name in [n for n, (_, reads) in held.items() if n in names or reads & names]:
            del held[name]

    def written(node: cst.CSTNode) -> None:
        code = node_code(node)
        if not any(w in code for w in MEMORY_WRITES):
            return
        stores = _calls(node, MEMORY_WRITES)
        if all(s.args and names_in(s.args[0].value) & exclusive and s.func.attr.value == "store" for s in stores):
            forget(set().union(*(names_in(s.args[0].value) & exclusive for s in stores)))
        else:
            for name in [n for n, (code_, _) in held.items() if "tl.load" in code_]:
                del held[name]

    out, comments = [], []  # comments of a dropped statement go to the next one kept
    for stmt in statements:
        assign = assignment(stmt)
        if assign is not None and not any(w in node_code(stmt) for w in NOT_PURE):
            target, value = assign
            code, reads = node_code(value), names_in(value)
            if held.get(target, (None,))[0] == code:
                comments.extend(stmt.leading_lines)
                continue  # it holds this value already
            forget({target})
            if target not in reads:
                held[target] = (code, reads)
        else:
            written(stmt)
            forget(bound_in(stmt))
        if comments:
            stmt = stmt.with_changes(leading_lines=(*comments, *stmt.leading_lines))
            comments = []
        out.append(stmt)
    return out


def one_load(statements: list) -> list:
    """Straight-line statements where a load of the same pointer and mask as an earlier one, with another `other`
    and no write or rebinding in between, is written as that load with its masked lanes replaced:
    `tl.where(mask, <the earlier load>, other)`, the same values. Both loads are then the same operation, which
    Triton merges: log-softmax's last sweep loads x with `other=0.0` where its first two use `-inf`, so its twin
    read the row twice (TTGIR for sm_90, Triton 3.6: 2 `tt.load` -> 1; KL divergence's twin 4 -> 2)."""
    seen: dict[tuple, tuple[cst.Call, set[str]]] = {}  # (pointer, mask, other keywords) -> (first load, its names)
    named: dict[str, tuple[str, set[str]]] = {}  # a mask kept in a name: `mask = cols < n` -> ("cols < n", names)

    class Rewrite(cst.CSTTransformer):
        def leave_Call(self, original_node, updated_node):
            key = _load_key(original_node, {n: code for n, (code, _) in named.items()})
            if key is None:
                return updated_node
            first = seen.get(key[0])
            if first is None:
                seen[key[0]] = (original_node, _reads(original_node))
                return updated_node
            if _load_key(first[0], {})[2] == key[2]:
                return updated_node  # the same load already: Triton merges it as it is
            where = f"tl.where({key[1]}, {node_code(first[0])}, {key[2]})"
            return cst.parse_expression(where)

    out = []
    for stmt in statements:
        if any(w in node_code(stmt) for w in NOT_PURE if w != "tl.store") or not isinstance(
            stmt, cst.SimpleStatementLine
        ):
            seen.clear()  # a block, an atomic, a volatile load: no reuse across it
            out.append(stmt)
            continue
        new = stmt.visit(Rewrite())
        if "tl.store" in node_code(stmt):
            seen.clear()
        rebound = bound_in(stmt)
        for key in [k for k, (_, names) in seen.items() if names & rebound]:
            del seen[key]
        for name in [n for n, (_, names) in named.items() if n in rebound or names & rebound]:
            del named[name]
        if (assign := assignment(stmt)) is not None and assign[0] not in names_in(assign[1]):
            named[assign[0]] = (node_code(assign[1]), _reads(assign[1]))
        out.append(new)
    return out


def _reads(node: cst.CSTNode) -> set[str]:
    """The variables an expression reads: its names, less keyword names (`mask=`) and attributes (`.load`)."""
    skip = set()

    class Skip(cst.CSTVisitor):
        def visit_Arg(self, arg: cst.Arg) -> None:
            if arg.keyword is not None:
                skip.add(id(arg.keyword))

        def visit_Attribute(self, attr: cst.Attribute) -> None:
            skip.add(id(attr.attr))

    node.visit(Skip())
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            if id(name) not in skip:
                found.add(name.value)

    node.visit(V())
    return found


def _load_key(call: cst.Call, named: dict[str, str]) -> tuple[tuple, str, str] | None:
    """For `tl.load(ptr, mask=m, other=o, ...)`: ((ptr, m, the other keywords), m, o), with a mask given by a name
    read as the code the name holds (`named`); None for any other call or a load without both a mask and an
    `other`."""
    if dotted(call.func) != "tl.load" or not call.args or call.args[0].keyword is not None:
        return None
    keywords = {a.keyword.value: node_code(a.value) for a in call.args[1:] if a.keyword is not None}
    if len(keywords) != len(call.args) - 1 or "mask" not in keywords or "other" not in keywords:
        return None
    rest = tuple(sorted((k, v) for k, v in keywords.items() if k not in ("mask", "other")))
    mask = named.get(keywords["mask"], keywords["mask"])
    return (node_code(call.args[0].value), mask, rest), keywords["mask"], keywords["other"]


def _calls(node: cst.CSTNode, prefixes: tuple[str, ...]) -> list[cst.Call]:
    return [c for c in calls(node) if dotted(c.func).startswith(prefixes)]


FRESH = (
    "torch.empty",
    "torch.empty_like",
    "torch.zeros",
    "torch.zeros_like",
    "torch.ones",
    "torch.ones_like",
    "torch.full",
    "torch.full_like",
    "torch.empty_strided",
)


def _exclusive_params(module: Module, call: cst.Call, kernel: cst.FunctionDef) -> frozenset[str]:
    """Kernel parameters bound to a tensor the launching function allocated (`torch.empty_like(x)`, ...) and bound
    once: no other argument can reach its memory, so a store through it cannot alias a load of another."""
    fn = module.enclosing(call)
    if fn is None:
        return frozenset()
    allocated: dict[str, int] = {}  # name -> how many times the function binds it
    fresh: set[str] = set()
    for node in module.positions:
        if isinstance(node, cst.AssignTarget) and module.enclosing(node) is fn:
            for name in names_in(node.target):
                allocated[name] = allocated.get(name, 0) + 1
        if (
            isinstance(node, cst.Assign)
            and module.enclosing(node) is fn
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, cst.Call)
            and dotted(node.value.func) in FRESH
        ):
            fresh.add(node.targets[0].target.value)
    mentions: dict[str, int] = {}
    for arg in call.args:
        for name in names_in(arg.value):
            mentions[name] = mentions.get(name, 0) + 1
    out = set()
    for arg in call.args:
        if (
            isinstance(arg.value, cst.Name)
            and arg.value.value in fresh
            and allocated.get(arg.value.value) == 1
            and mentions[arg.value.value] == 1
        ):
            param = kernel_param_for(kernel, call, arg)
            if param is not None:
                out.add(param)
    return frozenset(out)


@register
class WholeRowTile(AnchoredTransform):
    """Intent: hold a row in one tile, `BLOCK = next_power_of_2(n)`, when it fits, so a kernel that sweeps the row
    two or three times (statistics, then the output) reads it from memory once; rows wider than the cap keep the
    looped kernel. The host dispatches between the two (Liger's softmax single/multi-block kernels; FlagGems'
    `ONE_TILE_PER_CTA`; catalog family 8).

    Conditions: the one-tile kernel is launched only where the row fits its tile (n <= BLOCK: the dispatch and
    `next_power_of_2` see to it); its masks cover the lanes past the row; the tile fits in registers (the cap, and
    warps that grow with the tile); a value kept across a store is one the store cannot change (checked: the store
    goes to a buffer the host allocated for that argument alone).

    Failure: a one-tile kernel launched on a row wider than its tile silently drops the columns past the tile (a
    wrong result with no error); an uncapped tile spills registers or fails to compile (more than 2**20 elements).
    The simplified program (always the looped kernel, with a fixed moderate tile) is correct for every width.

    Sites: a host `if cond: one_tile[grid](...) else: looped[grid](...)` (either order), each branch that single
    launch, the one-tile kernel without loops, the looped kernel's every loop a column sweep `range(0, n, B)` with B
    passed by keyword. Simplify: the looped launch takes the if's place, its tile set to 1024. Params: `dispatch`
    (the whole statement) and `leading` (its comment lines). Optimize: a launch statement of a sweeping row kernel
    (1-D, every loop `range(0, n, B)`); with the expert's `dispatch` (in the expert's own program) that statement;
    elsewhere a generated twin of the kernel, each sweep run once at offset 0, a statement a later sweep repeats
    word for word kept from the first (`reused`) and a load repeated with another `other` written as the first one
    masked (`one_load`), launched when `n <= cap` with the tile `next_power_of_2(n)` and
    warps by tile width, the original launch otherwise."""

    id = "whole_row_tile"
    family = 8
    tag = "S"
    cost = 4
    conditions = ("divisible_by_block", "shared_memory_fits")
    intent = "hold a row that fits in one tile instead of sweeping it in fixed tiles"
    forward_rank = 2
    twin_suffix = TWIN

    def ladders(self, source: str) -> dict[str, tuple[str, str]]:
        """The kernels whose one-tile twin is launched with this family's warp ladder: computed at launch from the
        row's tile, so the launch-configuration search has no literal to change there."""
        return {kernel: (kernel + TWIN, WARPS_NAME) for kernel in twin_ladders(source)}

    def scaled_ladder(self, source: str, kernel: str, factor: float) -> str | None:
        return scaled_ladder(source, kernel, factor)

    # `simple` reads what the last `expert_anchors` recorded of its anchors (self._looped): anchors kept from an
    # earlier parse would not be in it
    keeps_found = False

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
        call = launch_statement(stmt)
        fixed = stmt.with_changes(
            body=[stmt.body[0].with_changes(value=_with_kwarg(call, seen["tile"], str(FIXED_BLOCK)))]
        )
        return fixed.with_changes(leading_lines=(*node.leading_lines, *stmt.leading_lines))

    def plain_anchors(self, module: Module):
        found = []
        for node in module.positions:
            if not isinstance(node, cst.SimpleStatementLine) or module.enclosing(node) is None:
                continue
            call = launch_statement(node)
            if call is None or (seen := _looped_launch(module, call)) is None:
                continue
            if _one_program(call):
                # one program reduces the whole problem (a final sum of partials), not a row: its width grows
                # with the input and passes the cap only where the launch costs microseconds. MSE's final
                # reduction's twin ran at x1.000 and spent an evaluation each time (H200, RESULTS.md#run-8,
                # RESULTS.md#run-11)
                continue
            if seen["kernel"] + TWIN in module.kernels() or "triton" not in imported_modules(module.tree):
                continue  # applied already (this is the fallback launch), or no triton.next_power_of_2 to call
            if {TILE, WARPS_NAME} & names_in(module.enclosing(node)):
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
        call = launch_statement(node)
        tile, warps = TILE, WARPS_NAME
        one = _with_kwarg(call, params["tile"], tile)
        one = _with_kwarg(one, "num_warps", warps)
        one = one.with_changes(func=one.func.with_changes(value=cst.Name(params["kernel"] + TWIN)))
        cap = int(params.get("cap", FUSED_CAP))
        code = (
            f"if {params['width']} <= {cap}:\n"
            f"    # The row fits one tile: the twin reads it once instead of once per sweep.\n"
            f"    {tile} = triton.next_power_of_2({params['width']})\n"
            f"    {warps} = {WARPS.format(t=tile)}\n"
            f"    {node_code(one)}\n"
            f"else:\n"
            f"    {statement_code(node)}\n"
        )
        return cst.parse_statement(code).with_changes(leading_lines=node.leading_lines)

    def _apply(self, source: str, site, plain: bool, params: dict | None) -> str:
        out = super()._apply(source, site, plain, params)
        if not plain or (params or {}).get("dispatch"):
            return out
        # the generated dispatch launches a twin that does not exist yet: write it after the kernel
        module = Module(out)
        kernel_name = site.params["kernel"]  # what plain_anchors read off the launch
        kernel = module.kernels().get(kernel_name)
        if kernel is None or kernel not in module.tree.body:
            raise ValueError(f"whole_row_tile: {kernel_name} is not a module-level kernel")
        twin_launch = next(c for c in _launches_of(module, kernel_name + TWIN))
        body = list(module.tree.body)
        i = body.index(kernel)
        body.insert(i + 1, one_tile_twin(kernel, _exclusive_params(module, twin_launch, kernel)))
        return module.tree.with_changes(body=body).code


def _launches_of(module: Module, kernel: str) -> list[cst.Call]:
    return [call for call in launches(module.tree) if call.func.value.value == kernel]


def _ladder_statement(module: Module, kernel: str) -> cst.SimpleStatementLine | None:
    """The `row_warps = <ladder>` line of the dispatch that launches `kernel`'s twin, if there is one."""
    for launch in _launches_of(module, kernel + TWIN):
        block = module.parents.get(module.parents.get(launch))  # the launch's Expr, its line, then the block
        block = module.parents.get(block) if not isinstance(block, cst.IndentedBlock) else block
        if not isinstance(block, cst.IndentedBlock):
            continue
        for stmt in block.body:
            assign = assignment(stmt)
            if assign is not None and assign[0] == WARPS_NAME and isinstance(assign[1], cst.IfExp):
                return stmt
    return None


def twin_ladders(source: str) -> list[str]:
    """The kernels whose one-tile twin is launched with the warp ladder this transform writes."""
    try:
        module = Module(source)
    except cst.ParserSyntaxError:
        return []
    return [k for k in module.kernels() if k + TWIN in module.kernels() and _ladder_statement(module, k) is not None]


def scaled_ladder(source: str, kernel: str, factor: float) -> str | None:
    """`source` with every rung of `kernel`'s twin warp ladder multiplied by `factor`, kept a power of two within
    1..32 (`4 if t < 2048 else 8 if ...` halved is `2 if t < 2048 else 4 if ...`); None where no rung moves."""
    module = Module(source)
    stmt = _ladder_statement(module, kernel)
    if stmt is None:
        return None

    def scaled(node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.IfExp):
            return node.with_changes(body=scaled(node.body), orelse=scaled(node.orelse))
        if isinstance(node, cst.Integer):
            value = min(32, max(1, int(int(node.value) * factor)))
            return cst.Integer(str(1 << (value.bit_length() - 1)))
        return node

    assign = stmt.body[0]
    new = stmt.with_changes(body=[assign.with_changes(value=scaled(assign.value))])
    if node_code(new) == node_code(stmt):
        return None
    return module.tree.deep_replace(stmt, new).code
