"""Launch configuration: the tile sizes, warp counts and pipeline depths a program launches its kernels with.

Not a reversible transform: a parameter search space. A launch `kernel[grid](..., BLOCK_M=BLOCK_M, num_warps=4)`
has tunable parameters when a keyword argument is a constexpr tile size, `num_warps` or `num_stages`, and its value
is an integer literal at the launch or a name bound to an integer literal in the launching function (chained
assignments such as `BLOCK_M = BLOCK_N = 32` included). Changing the bound name, not the keyword, keeps a grid that
reads the same name consistent with the tile.

A launch is read by position too, where the kernel is a module-level `@triton.jit` function of the same source: each
positional argument is matched to its parameter, and one bound to a `tl.constexpr` parameter counts as a keyword
argument of that name. A constexpr is a tile by its name (`TILE_NAME`) or by its role: the extent of a
`tl.arange(0, P)` in the kernel's body. Both are needed for hand-written wrappers that the keyword-and-name reading
missed; bitsandbytes's 8-bit blockwise dequantization launches
`dequant_8bit_kernel[grid](a, out, code, absmax, n, quant_blocksize, SPLIT_SIZE)` with `SPLIT_SIZE = 256` bound in
the wrapper, `grid = (triton.cdiv(n, SPLIT_SIZE),)`, and a kernel spanning `tl.arange(0, SPLIT_SIZE)`: no method
could change its tile. A tile found by role keeps its parameter's name as `keyword`, so the readers that match
tiles by name (expert configs, `elements_per_program`) see it under the name the kernel gives it. A positional
literal (`kernel[grid](x, 256)`) is rewritten in place at its position, as a keyword literal is: neither moves a grid
that spells the same number out (the correctness check answers for a grid the new tile no longer covers).

A launch configuration a caller hands to a host function as a `triton.Config` literal
(`int_matmul_kernel(a, b, c, triton.Config({"BLOCK_M": 32, ...}, num_warps=1, num_stages=1))`, for a wrapper that
launches with `num_warps=config.num_warps, **config.kwargs`, as torchao's int8 matmul does) is tunable where it is
written: each tile-named key of its dict and its `num_warps` / `num_stages`, when an integer literal, listed under the
called function's name as `kernel` (bound "config") and rewritten in the literal. Without it the tiles of a kernel
whose wrapper takes its configuration as an argument were out of every method's reach. A `triton.Config` inside a
list (an autotuner's `configs`) is not such an argument: the autotuner chooses among those, and
`autotune_single_config` is their transform.

A constexpr whose name is no tile's is still tunable as **work per program** when the kernel's loop runs up to it
(`for start in range(0, CHUNK, BLOCK)`): each program then handles CHUNK elements, and a grid that divides the
problem by the same bound name stays consistent. Those are listed only when asked (`work=True`): the other readers
of `tunables` treat every entry as a tile.

`tunables(source)` lists them; `with_values(source, {param: value})` rewrites them; `neighbours` proposes nearby
values (x2, /2, powers of two within bounds)."""

from __future__ import annotations

import ast
import functools
import math
import re
from dataclasses import dataclass, replace

import libcst as cst

from klineage.carry import literal_int
from klineage.transform import Bindings, broadcasts, constexpr_params, dotted, int_literal, is_jit

# Constexpr names that are tile sizes by convention (BLOCK_M, BLOCK_SIZE, TILE_N, BLOCK, BN, GROUP_M excluded).
TILE_NAME = re.compile(r"^(BLOCK|TILE)(_?[A-Z0-9]*)?$|^B[MNK]$|^(BLOCK|TILE)_SIZE(_[A-Z0-9]+)?$")
KNOBS = ("num_warps", "num_stages")
# Carried warps leave each thread at least this many of the elements one program handles: Liger's launch rule
# (calculate_settings) raises warps above 4 only where each thread keeps 8 or more (8 warps from 2048-element
# blocks, 16 from 8192, 32 from 32768), and on the H200 8 warps carried onto 256- to 512-element blocks (1 to 2
# elements per thread) ran at x0.57-0.86 on 9 of 10 kernels (x1.035 on one; RESULTS.md#run-5).
MIN_ELEMENTS_PER_THREAD = 8
# ... and at most this many: the same ladder never leaves a thread more than 64 (16 warps up to 32768 elements, 32
# above). Fewer warps than a launch has, where each thread would then hold more, spill rather than save: FlagGems's
# group norm holds a 32 x 4096 group in one program (1024 elements a thread at its 4 warps) and ran at x0.60 with
# 1 warp and x0.72-0.74 with 2 (H100, RESULTS.md#wild-h100-3).
MAX_ELEMENTS_PER_THREAD = 64
BOUNDS = {"num_warps": (1, 16), "num_stages": (1, 5)}
TILE_BOUNDS = (16, 4096)
# The atomic row sum's 512-element chunks ran at 0.59 of the copy roofline, 8192 at 0.84, 65536 at 0.82 (H200,
# benchmarks/roofline_gaps.py atomic, 2026-12-01): past a few thousand elements the grid thins out.
WORK_BOUNDS = (16, 65536)


@dataclass(frozen=True)
class Tunable:
    kernel: str
    keyword: str  # the launch's keyword: BLOCK_M, num_warps, ...
    name: str  # what is rewritten: the keyword itself (literal) or the host name bound to the literal
    value: int
    bound: str  # "literal" (at the launch), "assigned" (a name in the launching function) or "config" (a
    # `triton.Config` literal handed to the host function `kernel`)
    function: str
    work: bool = False  # work per program (a loop's bound), not a tile
    step: str = ""  # for work per program: the keyword of the tile its loop steps by, where it is one
    # for a name the launching function binds more than once: which binding the launch reads (1, 2, ... in source
    # order; transform.Bindings.reaching), 0 where it binds the name once
    binding: int = 0
    # a launch inside a loop of its host function: its kernel runs once an iteration (launch_candidates steps these
    # first)
    repeated: bool = False

    @property
    def key(self) -> str:
        if self.bound == "assigned":
            return f"{self.name}#{self.binding}" if self.binding else self.name
        return f"{self.kernel}.{self.keyword}"


def _loop_bounds(module: cst.Module) -> dict[str, dict[str, str]]:
    """Per module-level function: the parameters a `for` loop over `range`/`tl.range` runs up to, each with the
    parameter the loop steps by ("" when the step is no parameter)."""
    out: dict[str, dict[str, str]] = {}

    class Loops(cst.CSTVisitor):
        def __init__(self):
            self.found: dict[str, str] = {}

        def visit_For(self, node: cst.For) -> None:
            it = node.iter
            if not isinstance(it, cst.Call) or dotted(it.func) not in ("range", "tl.range") or len(it.args) < 2:
                return
            stop = it.args[1].value if it.args[1].keyword is None else None
            step = it.args[2].value if len(it.args) > 2 and it.args[2].keyword is None else None
            if isinstance(stop, cst.Name):
                self.found[stop.value] = step.value if isinstance(step, cst.Name) else ""

    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef):
            loops = Loops()
            stmt.visit(loops)
            params = {p.name.value for p in stmt.params.params}
            out[stmt.name.value] = {k: (v if v in params else "") for k, v in loops.found.items() if k in params}
    return out


@dataclass(frozen=True)
class _Signature:
    """What a launch of a kernel defined in the same source can be read by: its positional parameters in order, the
    constexpr ones, and the constexpr ones that are tiles by role (a `tl.arange(0, P)` extent in its body)."""

    positional: tuple[str, ...]
    constexpr: frozenset[str]
    tiles: frozenset[str]

    def is_tile(self, name: str) -> bool:
        return name in self.tiles


class _Extents(cst.CSTVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if dotted(node.func) not in ("tl.arange", "triton.language.arange") or len(node.args) != 2:
            return
        start, stop = node.args
        if start.keyword is None and stop.keyword is None and int_literal(start.value) == 0:
            if isinstance(stop.value, cst.Name):
                self.names.add(stop.value.value)


@functools.lru_cache(maxsize=256)
def _signature(source: str, kernel: str) -> _Signature | None:
    """`kernel`'s signature where it is a module-level `@triton.jit` function of `source`; None otherwise (a kernel
    imported from elsewhere is read by keyword and name alone: its parameters are not known here)."""
    fn = kernel_def(source, kernel)
    if fn is None or not is_jit(fn):
        return None
    constexpr = frozenset(constexpr_params(fn))
    extents = _Extents()
    fn.body.visit(extents)
    return _Signature(tuple(p.name.value for p in fn.params.params), constexpr, frozenset(extents.names & constexpr))


def tiles_by_role(source: str, kernel: str) -> frozenset[str]:
    """The constexpr parameters of `kernel` (a module-level `@triton.jit` function of `source`) that are tiles by
    their role, a `tl.arange(0, P)` extent in its body, whatever their names; empty where the kernel is not one."""
    signature = _signature(source, kernel)
    return signature.tiles if signature is not None else frozenset()


def _named_args(call: cst.Call, signature: _Signature | None):
    """(name, argument) for each argument of a launch that has a name: its keywords, and each positional argument
    bound to a constexpr parameter of a kernel whose signature is known. Positions after a `*args` are unknown."""
    position, known = 0, True
    for arg in call.args:
        if arg.keyword is not None:
            yield arg.keyword.value, arg
        elif arg.star == "*":
            known = False
        elif not arg.star and known:
            if signature is not None and position < len(signature.positional):
                name = signature.positional[position]
                if name in signature.constexpr:
                    yield name, arg
            position += 1


def _is_tile(name: str, signature: _Signature | None) -> bool:
    """A tile size by name (`TILE_NAME`) or by role in a kernel whose signature is known."""
    return bool(TILE_NAME.match(name)) or (signature is not None and signature.is_tile(name))


def _handed_configs(call: cst.Call) -> tuple[str, list[cst.Call]]:
    """The function a call calls by name and the `triton.Config` literals it is handed as arguments ("" and none
    for a launch or a method call: `configs.append(triton.Config(...))` builds an autotuner's list, FlagGems's
    Cambricon backend does so in five modules)."""
    callee = call.func.value if isinstance(call.func, cst.Name) else ""
    if not callee or callee == "Config":
        return "", []
    return callee, [a.value for a in call.args if isinstance(a.value, cst.Call) and _is_config(a.value)]


def _is_config(call: cst.Call) -> bool:
    return dotted(call.func) in ("triton.Config", "Config")


def _config_entries(config: cst.Call):
    """(keyword, value node, where) for each tunable setting of a `triton.Config` literal: the tile-named keys of its
    dict (`where` the dict element) and its `num_warps` / `num_stages` keywords (`where` the argument)."""
    if config.args and config.args[0].keyword is None and isinstance(config.args[0].value, cst.Dict):
        for element in config.args[0].value.elements:
            key = getattr(element, "key", None)
            if isinstance(key, cst.SimpleString) and TILE_NAME.match(key.evaluated_value or ""):
                yield key.evaluated_value, element.value, element
    for arg in config.args:
        if arg.keyword is not None and arg.keyword.value in KNOBS:
            yield arg.keyword.value, arg.value, arg


def _launched(call: cst.Call) -> str | None:
    """The kernel name of a launch `kernel[grid](...)`; None for any other call."""
    if isinstance(call.func, cst.Subscript) and isinstance(call.func.value, cst.Name):
        return call.func.value.value
    return None


class _InFunctions(cst.CSTVisitor):
    """Tracks the function and the statement a visited call is in, and the function's bindings (the literal a name
    at a launch holds, and the loops around the statement: transform.Bindings)."""

    def __init__(self):
        self.functions: list[cst.FunctionDef] = []
        self.statements: list[cst.SimpleStatementLine] = []
        self._bindings: dict[int, Bindings] = {}

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statements.append(node)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statements.pop()

    def _here(self) -> tuple[Bindings, cst.SimpleStatementLine] | None:
        """The bindings of the function around the statement being visited, and the statement."""
        if not self.functions or not self.statements:
            return None
        function = self.functions[-1]
        if id(function) not in self._bindings:
            self._bindings[id(function)] = Bindings(function)
        return self._bindings[id(function)], self.statements[-1]

    def reaching(self, name: str) -> tuple[int, int] | None:
        """(literal, binding) the name holds at the statement being visited, in the function around it."""
        here = self._here()
        return here[0].reaching(here[1], name) if here else None

    @property
    def in_loop(self) -> bool:
        """Whether the statement being visited is inside a loop of the function around it."""
        here = self._here()
        where = here[0].statements.get(id(here[1])) if here else None
        return bool(where and where[2])


class _Finder(_InFunctions):
    def __init__(self, source: str, work: dict[str, dict[str, str]] | None = None):
        super().__init__()
        self.source = source
        self.found: list[Tunable] = []
        self.work = work or {}

    def visit_Call(self, node: cst.Call) -> None:
        kernel = _launched(node)
        function = self.functions[-1] if self.functions else None
        if kernel is None:
            callee, configs = _handed_configs(node)
            fname = function.name.value if function is not None else "<module>"
            for config in configs:
                for keyword, value, _ in _config_entries(config):
                    if (v := int_literal(value)) is not None:
                        self.found.append(Tunable(callee, keyword, keyword, v, "config", fname))
            return
        signature = _signature(self.source, kernel)
        for keyword, arg in _named_args(node, signature):
            tile = keyword in KNOBS or _is_tile(keyword, signature)
            work = not tile and keyword in self.work.get(kernel, ())
            if not (tile or work):
                continue
            fname = function.name.value if function is not None else "<module>"
            step = self.work[kernel][keyword] if work else ""
            if (value := int_literal(arg.value)) is not None:
                t = Tunable(kernel, keyword, keyword, value, "literal", fname, work, step, repeated=self.in_loop)
                self.found.append(t)
            elif isinstance(arg.value, cst.Name) and (held := self.reaching(arg.value.value)) is not None:
                value, binding = held
                t = Tunable(
                    kernel, keyword, arg.value.value, value, "assigned", fname, work, step, binding, self.in_loop
                )
                self.found.append(t)


def tunables(source: str, work: bool = False) -> list[Tunable]:
    """Every tunable launch parameter, in source order, one entry per distinct `key`; with `work`, the work per
    program too."""
    return [t for t in _tunables(source) if work or not t.work]


@functools.lru_cache(maxsize=64)  # a proposal round asks for the same source's tunables many times
def _tunables(source: str) -> tuple[Tunable, ...]:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return ()
    finder = _Finder(source, _loop_bounds(module))
    module.visit(finder)
    out: dict[str, Tunable] = {}
    for t in finder.found:
        if t.key not in out:
            out[t.key] = t
        elif t.repeated and not out[t.key].repeated:  # one of the key's launches runs in a loop
            out[t.key] = replace(out[t.key], repeated=True)
    return tuple(out.values())


class _Rewriter(cst.CSTTransformer):
    def __init__(self, source: str, values: dict[str, int], found: dict[str, Tunable], module: cst.Module):
        self.source, self.values, self.found = source, values, found
        # id of the statement binding a retuned host name -> {name: value}: the binding its launches read, in the
        # launching function, and no other (a name bound for another kernel below, or in another function, stays)
        self.assigned: dict[int, dict[str, int]] = {}
        assigned = [(found[key], value) for key, value in values.items() if found[key].bound == "assigned"]
        launching = {t.function for t, _ in assigned}
        bindings = [(f.name.value, Bindings(f)) for f in _all_functions(module) if f.name.value in launching]
        for t, value in assigned:
            for chosen in (b.numbered(t.name, t.binding) for name, b in bindings if name == t.function):
                if chosen is not None and chosen.value is not None:
                    self.assigned.setdefault(id(chosen.statement), {})[t.name] = value

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        kernel = _launched(updated)
        if kernel is None:
            return self._configs(updated)
        # a literal changes where it stands, by keyword or by position (the names read off the original launch)
        literal = {}
        for name, arg in _named_args(original, _signature(self.source, kernel)):
            key = f"{kernel}.{name}"
            if key in self.values and self.found[key].bound == "literal":
                literal[id(arg)] = self.values[key]
        args = [
            arg.with_changes(value=cst.Integer(str(literal[id(orig)]))) if id(orig) in literal else arg
            for orig, arg in zip(original.args, updated.args)
        ]
        return updated.with_changes(args=args)

    def _configs(self, call: cst.Call) -> cst.Call:
        """A call handed `triton.Config` literals, their retuned settings rewritten in place."""
        callee, configs = _handed_configs(call)
        if not configs:
            return call
        new = {}
        for config in configs:
            changes = {}
            for keyword, _, where in _config_entries(config):
                key = f"{callee}.{keyword}"
                if key in self.values and self.found[key].bound == "config":
                    changes[id(where)] = where.with_changes(value=cst.Integer(str(self.values[key])))
            if changes:
                new[id(config)] = _replaced(config, changes)
        args = [a.with_changes(value=new[id(a.value)]) if id(a.value) in new else a for a in call.args]
        return call.with_changes(args=args)

    def leave_SimpleStatementLine(self, original, updated):
        """`A = B = 32` with B retuned becomes `A = 32` and `B = 64` on separate lines; in `A, B = 512, 128` the
        retuned element changes in place."""
        here = self.assigned.get(id(original))
        if not here or len(updated.body) != 1 or not isinstance(updated.body[0], cst.Assign):
            return updated
        assign = updated.body[0]
        if len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Tuple):
            return self._tuple(updated, assign, here)
        names = [t.target.value for t in assign.targets if isinstance(t.target, cst.Name)]
        if int_literal(assign.value) is None or not any(n in here for n in names):
            return updated
        if len(names) != len(assign.targets):
            return updated
        lines = [
            updated.with_changes(
                body=[
                    cst.Assign(
                        [cst.AssignTarget(cst.Name(n))], cst.Integer(str(here.get(n, int_literal(assign.value))))
                    )
                ]
            )
            for n in names
        ]
        return cst.FlattenSentinel(lines)

    def _tuple(self, line, assign: cst.Assign, here: dict[str, int]):
        target, value = assign.targets[0].target, assign.value
        if not isinstance(value, cst.Tuple) or len(value.elements) != len(target.elements):
            return line
        elements = []
        for t, v in zip(target.elements, value.elements):
            name = t.value.value if isinstance(t.value, cst.Name) else None
            if name in here and int_literal(v.value) is not None:
                v = v.with_changes(value=cst.Integer(str(here[name])))
            elements.append(v)
        return line.with_changes(body=[assign.with_changes(value=value.with_changes(elements=elements))])


def _replaced(config: cst.Call, changes: dict[int, cst.CSTNode]) -> cst.Call:
    """`config` with the dict elements and keyword arguments named by id in `changes` replaced."""
    args = [changes.get(id(a), a) for a in config.args]
    if args and isinstance(args[0].value, cst.Dict):
        elements = [changes.get(id(e), e) for e in args[0].value.elements]
        args[0] = args[0].with_changes(value=args[0].value.with_changes(elements=elements))
    return config.with_changes(args=args)


def present_warps(source: str, kernel: str) -> int:
    """The warps `kernel` is launched with: a literal `num_warps`, else Triton's default of 4."""
    return next((t.value for t in tunables(source) if t.kernel == kernel and t.keyword == "num_warps"), 4)


def expert_tiles(skill_params: dict) -> list[dict[str, int]]:
    """The tile/warps/stages settings an expert's autotune configs (or launch) chose, as {name: value} dicts."""
    out = []
    configs = skill_params.get("config_list") or skill_params.get("configs")
    if configs:
        try:
            tree = ast.parse(configs, mode="eval")
        except SyntaxError:
            tree = None
        for call in ast.walk(tree) if tree is not None else []:
            if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", "")) == "Config":
                values: dict[str, int] = {}
                if call.args and isinstance(call.args[0], ast.Dict):
                    for k, v in zip(call.args[0].keys, call.args[0].values):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, int):
                            values[str(k.value)] = v.value
                for kw in call.keywords:
                    if kw.arg in KNOBS and isinstance(kw.value, ast.Constant):
                        values[kw.arg] = kw.value.value
                if values:
                    out.append(values)
    knobs = {k: v for k, v in ((k, literal_int(skill_params.get(k))) for k in KNOBS) if v}
    if knobs:
        out.append(knobs)
    return out


def elements_per_program(source: str, kernel: str) -> int | None:
    """The product of the tile sizes `kernel` is launched with (every launch alike), when each is a literal or a
    name bound once to one in the launching function; None when any is computed (`next_power_of_2(n)`), comes from
    autotune, or the launches differ. An upper bound on the elements one program handles (a matmul's BLOCK_K is
    a loop step, counted too)."""
    return _elements(source, kernel)


@functools.lru_cache(maxsize=64)
def _elements(source: str, kernel: str) -> int | None:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None
    finder = _LaunchTiles(kernel, _signature(source, kernel))
    module.visit(finder)
    products = {None if tiles is None else _tile_product(source, kernel, tiles) for tiles in finder.tiles}
    if len(products) != 1 or None in products:
        return None
    return products.pop()


def _tile_product(source: str, kernel: str, tiles: dict[str, int]) -> int | None:
    """The elements a program handles with these tile sizes: their product, a tile name counted once per dimension
    it spans. A 2-D kernel may span one name twice (`tl.arange(0, BLOCK)` for rows and for columns: BLOCK^2
    elements, the 32x32 transpose); counting it once had undercounted, so such kernels were left uncapped and took
    SwiGLU's 8 warps on 1024 elements (x0.77, H200, RESULTS.md#run-19). Twice is an upper bound where both spans
    lie along one dimension; a 1-D kernel that reuses the name in several loops over a row still handles BLOCK
    elements at a time."""
    body = kernel_code(source, kernel)
    if not body or not tiles:
        return None
    spans = re.findall(r"tl\.arange\(\s*0\s*,\s*(\w+)\s*\)", body)
    two_d = broadcasts(body)
    return math.prod(
        v ** (min(spans.count(name), 2) if two_d and spans.count(name) > 1 else 1) for name, v in tiles.items()
    )


def launched_elements(source: str, kernel: str, launches: list[dict] | None) -> int | None:
    """The elements one program of `kernel` handles as its launches on a case asked for them (`launches`: the
    correctness check's rows, klineage.gates.launch_rows), where every launch of the kernel agrees; None without a
    launch, a tile constexpr, or agreement. Where `elements_per_program` cannot read a tile computed at run time
    (`next_power_of_2(half)`), the launch had its value."""
    products, signature = set(), _signature(source, kernel)
    for row in kernel_rows(launches, kernel):
        tiles = {name: v for name, v in row.get("constexprs", {}).items() if _is_tile(name, signature)}
        products.add(_tile_product(source, kernel, tiles))
    if len(products) != 1 or None in products:
        return None
    return products.pop()


@functools.lru_cache(maxsize=64)
def kernel_code(source: str, kernel: str) -> str:
    """The source of the module-level function `kernel` ("" when there is none or the source does not parse)."""
    fn = kernel_def(source, kernel)
    return parsed(source).code_for_node(fn) if fn is not None else ""


def kernel_def(source: str, kernel: str) -> cst.FunctionDef | None:
    """The module-level function `kernel` of `source` (None when there is none or the source does not parse); the
    source is parsed once for every name asked of it (`parsed`)."""
    module = parsed(source)
    if module is None:
        return None
    return next((n for n in module.body if isinstance(n, cst.FunctionDef) and n.name.value == kernel), None)


@functools.lru_cache(maxsize=16)
def parsed(source: str) -> cst.Module | None:
    """`source` parsed (None when it does not parse), once for every caller: libcst's trees are immutable, so the
    cached module is shared safely."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError:
        return None


def kernel_rows(launches: list[dict] | None, kernel: str) -> list[dict]:
    """The launch rows (klineage.gates.launch_rows) of `kernel`: a row names it by qualified name."""
    return [row for row in launches or [] if row.get("kernel", "").rsplit(".", 1)[-1] == kernel]


class _LaunchTiles(_InFunctions):
    def __init__(self, kernel: str, signature: _Signature | None = None):
        super().__init__()
        self.kernel, self.tiles = kernel, []  # per launch: its literal tile sizes, or None
        self.signature = signature

    def visit_Call(self, node: cst.Call) -> None:
        if not (
            isinstance(node.func, cst.Subscript)
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value == self.kernel
        ):
            return
        tiles = {}
        for name, arg in _named_args(node, self.signature):
            if not _is_tile(name, self.signature):
                continue
            value = int_literal(arg.value)
            if value is None and isinstance(arg.value, cst.Name) and (held := self.reaching(arg.value.value)):
                value = held[0]
            if value is None:
                self.tiles.append(None)
                return
            tiles[name] = value
        self.tiles.append(tiles or None)


def with_values(source: str, values: dict[str, int]) -> str:
    """Rewrite tunables by `key` (a host name, or `kernel.keyword` for literals at the launch)."""
    found = {t.key: t for t in tunables(source, work=True)}
    unknown = set(values) - set(found)
    if unknown:
        raise KeyError(f"not tunable here: {sorted(unknown)}")
    module = cst.parse_module(source)
    return module.visit(_Rewriter(source, values, found, module)).code


def _all_functions(node: cst.CSTNode) -> list[cst.FunctionDef]:
    found: list[cst.FunctionDef] = []

    class Functions(cst.CSTVisitor):
        def visit_FunctionDef(self, f: cst.FunctionDef) -> None:
            found.append(f)

    node.visit(Functions())
    return found


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def neighbours(t: Tunable) -> list[int]:
    """Values next to the current one: x2 and /2, kept within bounds and powers of two."""
    out = []
    for v in (t.value * 2, t.value // 2):
        if t.keyword == "num_stages":
            v = t.value + (1 if v > t.value else -1)
        if allowed(t, v):
            out.append(v)
    return out


def allowed(t: Tunable, value: int) -> bool:
    """Whether `t` may take `value`: within its bounds, a power of two (stages: any count), not its present one."""
    lo, hi = WORK_BOUNDS if t.work else BOUNDS.get(t.keyword, TILE_BOUNDS)
    return lo <= value <= hi and value != t.value and (t.keyword == "num_stages" or _pow2(value))


def describe(values: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items()))


__all__ = ["Tunable", "allowed", "describe", "neighbours", "tiles_by_role", "tunables", "with_values"]


class _ToMeta(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]):
        self.names, self.changed = names, False

    def leave_Name(self, original, updated):
        if updated.value in self.names:
            self.changed = True
            return cst.parse_expression(f'META["{self.names[updated.value]}"]')
        return updated


def _as_meta_lambda(expr: cst.BaseExpression, names: dict[str, str]) -> cst.BaseExpression | None:
    if isinstance(expr, cst.Lambda):
        return None
    renamer = _ToMeta(names)
    body = expr.visit(renamer)
    if not renamer.changed:
        return None
    return cst.parse_expression("lambda META: " + cst.Module([]).code_for_node(body))


class _GridNames(cst.CSTVisitor):
    """Names used as the grid of `kernel[grid](...)` launches."""

    def __init__(self, kernel: str):
        self.kernel, self.names = kernel, set()

    def visit_Call(self, call: cst.Call) -> None:
        func = call.func
        if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and func.value.value == self.kernel:
            index = func.slice[0].slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Name):
                self.names.add(index.value.value)


class _MetaGrid(cst.CSTTransformer):
    """In each function that launches `kernel`, the grid (inline, or a name bound once in that function) becomes
    `lambda META: ...` with the tile names read from META."""

    def __init__(self, kernel: str, names: dict[str, str]):
        self.kernel, self.names, self.grid_names, self.changed = kernel, names, set(), False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        finder = _GridNames(self.kernel)
        node.visit(finder)
        self.grid_names = finder.names

    def leave_Assign(self, original, updated):
        targets = [t.target for t in updated.targets]
        if len(targets) == 1 and isinstance(targets[0], cst.Name) and targets[0].value in self.grid_names:
            new = _as_meta_lambda(updated.value, self.names)
            if new is not None:
                self.changed = True
                return updated.with_changes(value=new)
        return updated

    def leave_Subscript(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value == self.kernel and len(updated.slice) == 1:
            index = updated.slice[0].slice
            if isinstance(index, cst.Index) and not isinstance(index.value, cst.Name):
                new = _as_meta_lambda(index.value, self.names)
                if new is not None:
                    self.changed = True
                    return updated.with_changes(slice=[updated.slice[0].with_changes(slice=cst.Index(new))])
        return updated


def meta_grid(source: str, kernel: str, names: dict[str, str]) -> str:
    """`source` with `kernel`'s launch grid computed from META where it read any of the host tile names (`names`:
    each host name with the kernel parameter it is passed as, META's key): an autotuned kernel's tiles come from its
    config, so a grid sized by the host's tile launches the wrong count. The key is the parameter, not the host's
    name: bitsandbytes passes `SPLIT_NUM_BLOCKS=split_num_blocks`, and a grid reading `META["split_num_blocks"]`
    raised KeyError on three config-list candidates of one H100 run (docs/runs/2026-12-06-h100-wild6)."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return source
    return module.visit(_MetaGrid(kernel, names)).code
