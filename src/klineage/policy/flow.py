"""Rules that depend on where code runs, over all the program's modules at once:

- **every function of a judged module** (HOST_EVERYWHERE: not only forward and what it names, because a call
  graph by name misses `forward = impl`, `self.forward = ...` and a decorator's wrapper; the bundled examples and
  the held-out programs read no tensor data anywhere): no host transfers of tensor data (`.tolist()`, `.item()`,
  `.numpy()`, `.cpu()`, the host device named), and no scalar read out of a tensor-derived value (`float(x[0])`,
  `math.exp(t)`, an f-string of it, a truth test of an element): values reach Python only through these, and with
  them a program computes its answer in plain Python and copies it in with a trivial kernel. What derives from a
  tensor is tracked by a small taint analysis: the parameters of every function, and whatever is computed from
  them except through metadata (`.shape`, `.stride()`, ...).
- **Triton kernels** (functions under a triton decorator): only kernel code. Under the CPU interpreter a kernel's
  body is plain Python run with the dispatch trace off, so a call to torch or to a host helper there computes
  unseen; the GPU compiler would refuse it, but the interpreter does not.
- **launch callbacks** (a launch's grid, autotune/heuristics callables, pre-hooks, `triton.set_allocator`): the
  harness runs them with the dispatch trace off, so they may read metadata and allocate, never compute on or write
  into tensors."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from klineage.policy.imports import Binding
from klineage.policy.names import HOST_METHODS, SAFE_BUILTINS, SCALAR_SINKS, resolve
from klineage.policy.rules import SELF_NAMES, chain

CLEAN_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda", "layout", "requires_grad", "itemsize", "nbytes"}
CLEAN_METHODS = {
    "size", "stride", "numel", "dim", "element_size", "is_contiguous", "data_ptr", "storage_offset", "get_device",
    "nelement",
}  # fmt: skip
CLEAN_CALLS = {"len", "isinstance", "id", "callable", "issubclass"}
KERNEL_BUILTINS = {"range", "min", "max", "len", "float", "int", "bool", "isinstance", "abs", "print"}
KERNEL_ATTRIBUTES = {"handle", "data", "numpy", "tolist", "item", "cpu", "base"}
LAUNCH_REGISTRARS = ("autotune", "heuristics", "Config", "set_allocator", "jit")
CALLBACK_TORCH = {
    "torch.cuda.is_available",
    "torch.cuda.get_device_properties",
    "torch.cuda.current_device",
    "torch.cuda.get_device_capability",
    "torch.cuda.device_count",
    "torch.empty",
    "torch.zeros",
}
CONTAINER_METHODS = {"values", "keys", "items", "get", "index", "count", "copy", "append", "extend"}
# methods that put their argument into the receiver: the receiver then holds what the argument held
MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "copy_", "fill_", "put", "appendleft"}


@dataclass
class Module:
    name: str
    tree: ast.AST
    imports: dict[str, Binding]
    judged: bool


@dataclass
class Flow:
    """Functions of every module by name, which are kernels, which run at launch."""

    modules: list[Module]
    functions: dict[str, list[tuple[Module, ast.AST]]] = field(default_factory=dict)
    kernels: set[int] = field(default_factory=set)  # id() of kernel FunctionDefs
    kernel_names: set[str] = field(default_factory=set)
    callbacks: set[int] = field(default_factory=set)

    def index(self) -> None:
        for module in self.modules:
            for node in ast.walk(module.tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, []).append((module, node))
                    if any(_is_triton(d, module.imports) for d in node.decorator_list):
                        self.kernels.add(id(node))
                        self.kernel_names.add(node.name)
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.functions.setdefault(target.id, []).append((module, node.value))

    def close(self, roots: list[ast.AST], into: set[int]) -> None:
        """Add `roots` and every non-kernel function their bodies name, transitively."""
        todo = list(roots)
        while todo:
            node = todo.pop()
            if id(node) in into or id(node) in self.kernels:
                continue
            into.add(id(node))
            for inner in ast.walk(node):
                name = (
                    inner.id
                    if isinstance(inner, ast.Name)
                    else inner.attr
                    if isinstance(inner, ast.Attribute)
                    else None
                )
                for _, function in self.functions.get(name, []) if name else []:
                    todo.append(function)

    def roots(self) -> list[ast.AST]:
        """Launch callbacks: what a launch's grid or a launch registrar (autotune, heuristics, ...) is given."""
        callbacks: list[ast.AST] = []
        for module in self.modules:
            for node in ast.walk(module.tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
                    if _name_of(node.func.value) in self.kernel_names:
                        callbacks.extend(self._callables(node.func.slice))
                elif isinstance(node, ast.Call) and _name_of(node.func) in LAUNCH_REGISTRARS:
                    for arg in [*node.args, *(k.value for k in node.keywords)]:
                        callbacks.extend(self._callables(arg))
        return callbacks

    def _callables(self, expr: ast.AST) -> list[ast.AST]:
        found = []
        for node in ast.walk(expr):
            if isinstance(node, ast.Lambda):
                found.append(node)
            elif isinstance(node, ast.Name):
                found.extend(f for _, f in self.functions.get(node.id, []))
        return found


def _name_of(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _is_triton(decorator: ast.AST, imports: dict[str, Binding]) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    found = chain(target)
    if found is None:
        return False
    binding = imports.get(found[0])
    path = ".".join([binding.path if binding else found[0], *found[1]])
    return path.startswith("triton.") or path in ("jit", "triton.jit")


# --- taint ------------------------------------------------------------------------------------------------------


@dataclass
class Taint:
    """Names and `self` attributes that may hold tensor data, grown to a fixpoint over the functions."""

    names: set[str] = field(default_factory=set)
    attrs: set[str] = field(default_factory=set)

    def of(self, node: ast.AST, local: set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in local or node.id in self.names
        if isinstance(node, ast.Attribute):
            if node.attr in CLEAN_ATTRS:
                return False
            if isinstance(node.value, ast.Name) and node.value.id in SELF_NAMES:
                return node.attr in self.attrs
            return self.of(node.value, local)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in CLEAN_METHODS:
                return False
            if isinstance(func, ast.Name) and func.id in CLEAN_CALLS:
                return False
            args = [*node.args, *(k.value for k in node.keywords)]
            return (
                any(self.of(a, local) for a in args) or isinstance(func, ast.Attribute) and self.of(func.value, local)
            )
        if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            return False
        if isinstance(node, (ast.Constant, ast.Lambda)):
            return False
        return any(self.of(child, local) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))

    def grow(self, function: ast.AST, outer: set[str], imports: dict[str, Binding]) -> set[str]:
        """The function's tainted locals (with the tainted names of the functions around it, which a closure
        reads); adds to `names` what it stores into names it declares global, to `attrs` what it stores on `self`."""
        args = function.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        local = {a.arg for a in params if a is not None and a.arg not in SELF_NAMES} | outer
        declared = {n for node in ast.walk(function) if isinstance(node, ast.Global) for n in node.names}
        for _ in range(4):  # assignments out of order (loops): a few passes reach the fixpoint in practice
            before = (len(local), len(self.names), len(self.attrs))
            for node in ast.walk(function):
                self._store(node, local, declared, imports)
            if before == (len(local), len(self.names), len(self.attrs)):
                break
        return local

    def _store(self, node: ast.AST, local: set[str], declared: set[str], imports: dict[str, Binding]) -> None:
        pairs = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs = [(node.optional_vars, node.context_expr)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            # lst.append(x): the container holds tensor data (a module's function is no container)
            root = chain(node.func.value)
            if node.args and not (root and root[0] in imports) and any(self.of(a, local) for a in node.args):
                pairs = [(node.func.value, node.args[0])]
        for target, value in pairs:
            if self.of(value, local):
                self._mark(target, local, declared)

    def _mark(self, target: ast.AST, local: set[str], declared: set[str]) -> None:
        if isinstance(target, ast.Name):
            local.add(target.id)
            if target.id in declared:
                self.names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for item in target.elts:
                self._mark(item, local, declared)
        elif isinstance(target, ast.Starred):
            self._mark(target.value, local, declared)
        elif isinstance(target, ast.Attribute):
            if isinstance(target.value, ast.Name) and target.value.id in SELF_NAMES:
                self.attrs.add(target.attr)
            else:
                self._mark(target.value, local, declared)
        elif isinstance(target, ast.Subscript):
            self._mark(target.value, local, declared)


def enclosing(node: ast.AST) -> ast.AST | None:
    """The function or lambda `node` is defined in (parents set by `rules.with_parents`), or None at module level."""
    parent = getattr(node, "parent", None)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        parent = getattr(parent, "parent", None)
    return parent


# --- the rules ----------------------------------------------------------------------------------------------------


def flow_findings(modules: list[Module]) -> list[tuple[Module, int, str, str]]:
    flow = Flow(modules)
    flow.index()
    flow.close(flow.roots(), flow.callbacks)
    found: list[tuple[Module, int, str, str]] = []
    taint = Taint()
    # every function's taint, outer functions first (ast.walk is breadth-first), so a closure starts from what
    # its enclosing function holds; three rounds carry what one function stores on `self` into the others
    functions = [
        (m, f)
        for m in modules
        for f in ast.walk(m.tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and id(f) not in flow.kernels
    ]
    locals_of: dict[int, set[str]] = {}
    for _ in range(3):
        for m, f in functions:
            outer = enclosing(f)
            locals_of[id(f)] = taint.grow(f, locals_of.get(id(outer), set()) if outer else set(), m.imports)
    for module, function in functions:  # HOST_EVERYWHERE (the module's docstring)
        if not module.judged:
            continue
        for line, rule, detail in _host_rules(function, module, taint, locals_of[id(function)]):
            found.append((module, line, rule, detail))
        if id(function) in flow.callbacks:
            for line, rule, detail in _callback_rules(function, module):
                found.append((module, line, rule, detail))
    for module in modules:
        if module.judged:
            for function in ast.walk(module.tree):
                if id(function) in flow.kernels:
                    found.extend((module, *f) for f in _kernel_rules(function, module, flow))
    return found


def _host_rules(function: ast.AST, module: Module, taint: Taint, local: set[str]) -> list[tuple[int, str, str]]:
    out = []
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and node.attr in HOST_METHODS and not _module_attribute(node, module):
            # called or not: `f = x.tolist; f()` reads the same data
            out.append((node.lineno, "host_transfer", f".{node.attr}(): {HOST_METHODS[node.attr]}"))
        elif _host_device_argument(node):
            out.append((node.lineno, "host_transfer", '"cpu" given as a device: a copy to the host'))
        elif (sink := _scalar_sink(node, module, taint, local)) and not _in_raise(node):
            out.append((node.lineno, "scalar_extraction", sink))
    return out


def _host_device_argument(node: ast.AST) -> bool:
    """ "cpu" handed to a call (`x.to("cpu")`, `torch.device("cpu")`, `device="cpu"`); compared, it is a test of where
    a tensor is (`x.device.type == "cpu"` under the interpreter), not a copy."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(":")[0] == "cpu"):
        return False
    return isinstance(getattr(node, "parent", None), (ast.Call, ast.keyword))


def _module_attribute(node: ast.Attribute, module: Module) -> bool:
    """`torch.cpu.synchronize`: a module of an allowed tree, not a tensor's method (the attribute rules resolve
    it)."""
    found = chain(node)
    return found is not None and found[0] in module.imports and module.imports[found[0]].kind == "module"


def _in_raise(node: ast.AST) -> bool:
    """Inside a `raise` statement: an error message that formats an argument (the matmul expert's `{path!r}`).
    The message leaves forward as an exception, which fails the check."""
    while (node := getattr(node, "parent", None)) is not None:
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def _scalar_sink(node: ast.AST, module: Module, taint: Taint, local: set[str]) -> str | None:
    """A read of a tensor-derived value into a Python scalar, string or branch."""
    tainted = taint.of
    if isinstance(node, ast.Call):
        args = [*node.args, *(k.value for k in node.keywords)]
        if not any(tainted(a, local) for a in args):
            return None
        if isinstance(node.func, ast.Name) and node.func.id in SCALAR_SINKS and node.func.id in SAFE_BUILTINS:
            return f"{node.func.id}() of a tensor-derived value reads its data into Python"
        if isinstance(node.func, ast.Name) and node.func.id in ("map", "filter", "sorted", "max", "min"):
            passed = [a for a in args if isinstance(a, ast.Name) and a.id in SCALAR_SINKS]
            if passed:
                return f"{node.func.id}({passed[0].id}, ...) of a tensor-derived value reads its data into Python"
        found = chain(node.func)
        binding = module.imports.get(found[0]) if found else None
        if binding is not None and binding.path.split(".")[0] == "math":
            return f"{ast.unparse(node.func)}() of a tensor-derived value reads its data into Python"
    elif isinstance(node, ast.FormattedValue) and tainted(node.value, local):
        return "an f-string of a tensor-derived value reads its data into Python"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant):
        if isinstance(node.left.value, str) and tainted(node.right, local):
            return "%-formatting of a tensor-derived value reads its data into Python"
    elif isinstance(node, ast.Subscript) and tainted(node.slice, local) and not tainted(node.value, local):
        return "a tensor-derived value used as an index reads its data into Python"
    elif isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)) and _tensor_test(node.test, taint, local):
        return "a truth test of a tensor's element or reduction reads its data into Python"
    return None


def _tensor_test(test: ast.AST, taint: Taint, local: set[str]) -> bool:
    """`if x[i]:`, `while t.any():`: a test that is an element or a tensor method's result of a tensor-derived
    value. A plain name, a comparison or a call of the program's own helper is not judged: in host code they are
    flags, lists and sizes far more often than tensors (the matmul expert's autotune pruning), and a comparison of
    tensors in forward is PyTorch compute, which the dispatch trace sees."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Subscript):
        keyed = isinstance(test.slice, ast.Constant) and isinstance(test.slice.value, str)  # a dict's entry
        return not keyed and taint.of(test.value, local)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute):
        return test.func.attr in tensor_methods() and taint.of(test.func.value, local)
    return False


@functools.cache
def tensor_methods() -> frozenset[str]:
    """Public methods of torch.Tensor that read or compute on its data (metadata and container methods aside)."""
    import torch

    return frozenset({n for n in dir(torch.Tensor) if not n.startswith("_")} - CLEAN_METHODS - CONTAINER_METHODS)


def _callback_rules(function: ast.AST, module: Module) -> list[tuple[int, str, str]]:
    import torch

    out = []
    methods = tensor_methods()
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "parent", None), ast.Attribute):
            found = chain(node)
            binding = module.imports.get(found[0]) if found else None
            if binding is not None and binding.path.split(".")[0] == "torch":
                head = binding.path.split(".")
                resolved = resolve(head[0], [*head[1:], *found[1]])
                if resolved.path not in CALLBACK_TORCH and not isinstance(resolved.obj, torch.dtype):
                    out.append((node.lineno, "launch_callback", f"{ast.unparse(node)} at launch (no dispatch trace)"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods:
            out.append((node.lineno, "launch_callback", f".{node.func.attr}() at launch runs with no dispatch trace"))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            root = chain(node.value)
            if root is not None and root[0] in params:
                out.append((node.lineno, "launch_callback", "writes into a launch argument"))
    return out


def _kernel_rules(function: ast.AST, module: Module, flow: Flow) -> list[tuple[int, str, str]]:
    local = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    constants = _module_constants(module.tree)
    out = []
    for node in ast.walk(function):
        if node in function.decorator_list or any(node is d for d in function.decorator_list):
            continue
        if isinstance(node, ast.Attribute) and node.attr in KERNEL_ATTRIBUTES:
            out.append((node.lineno, "kernel_body", f".{node.attr} in a Triton kernel: interpreter internals"))
        if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
            continue
        name = node.id
        binding = module.imports.get(name)
        if name in local or name in constants or name in flow.kernel_names or name in KERNEL_BUILTINS:
            continue
        if binding is not None and binding.path.split(".")[0] in ("triton", "math"):
            continue
        if binding is not None and binding.kind == "own_object" and not _host_function(binding, flow):
            continue
        out.append((node.lineno, "kernel_body", f"{name} in a Triton kernel: host Python runs there unseen"))
    return [f for f in out if not _in_decorator(function, f[0])]


def _host_function(binding: Binding, flow: Flow) -> bool:
    """A name imported from the program's own modules that is a function there but not a kernel: under the
    interpreter a kernel could call it and run host Python unseen."""
    name = binding.path.rsplit(".", 1)[-1]
    return name in flow.functions and name not in flow.kernel_names


def _in_decorator(function: ast.AST, line: int) -> bool:
    return any(d.lineno <= line <= (d.end_lineno or d.lineno) for d in function.decorator_list)


def _module_constants(tree: ast.AST) -> set[str]:
    """Module-level names bound to constant expressions (`LOG2E = 1.44`, `BLOCK: tl.constexpr = 128`)."""
    names = set()
    for node in getattr(tree, "body", []):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if value is None or not all(
            isinstance(
                n,
                (
                    ast.Constant,
                    ast.operator,
                    ast.unaryop,
                    ast.BinOp,
                    ast.UnaryOp,
                    ast.Call,
                    ast.Attribute,
                    ast.Name,
                    ast.Load,
                ),
            )
            for n in ast.walk(value)
        ):
            continue  # fmt: skip
        if any(isinstance(n, ast.Call) and "constexpr" not in ast.unparse(n.func) for n in ast.walk(value)):
            continue
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names
