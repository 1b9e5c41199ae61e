"""The wild suite: real Triton kernels from installed packages that no lineage was mined from, each its own reference.

Every entry is a frozen `WildKernel`: the installed wrapper (or `@triton.jit` function) a program calls, written as a
GPU user writes it (`ModelNew.forward` calls the package), and an inputs file at the bench (GPU) size: module-level
integer sizes and `get_inputs()`; shrinking (klineage.shrink) derives the CPU case from it. Nothing of the packages
is copied: the program and inputs files are written at run time into `$KLINEAGE_HOME/wild/<name>/`, and the
reference is the program itself (klineage.reference: self-reference). Beside them a `pytorch.py` workload whose
`Model` is PyTorch's own op on the same inputs: it classifies a rejected start (`classify`), never serves as the
reference.

The disjointness rule, fixed before the first run (docs/RESULTS.md, "The wild suite"): experts are mined only from
modules under EXPERT_MODULE_PREFIXES; a wild kernel's module is under none of them, and every module it imports from
its own package is under none either (`rule_violations`, read from the installed files without importing them: a
package such as FlagGems cannot be imported without a GPU outside a candidate process)."""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

# the modules experts are mined from: the ecosystem catalogue's, one definition for both sides of the rule
from klineage.program import module_file
from klineage.suites.ecosystem import EXPERT_MODULE_PREFIXES

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


@dataclass(frozen=True)
class WildKernel:
    """One wild kernel. `module` holds the `@triton.jit` functions it launches (carried as a rewritable copy);
    `body` is `ModelNew.forward`'s body (a call of `function`, imported from `module`), `reference` the PyTorch op's
    body on the same arguments; `sizes` the bench-size integers `inputs` (get_inputs' list) reads."""

    name: str
    package: str  # the import name of the installed package
    distribution: str  # its distribution, for the version stamped in a report
    module: str
    function: str
    args: str
    body: str
    reference: str
    sizes: dict[str, int] = field(default_factory=dict)
    inputs: str = "[]"
    extra: str = ""  # lines the inputs file adds (HOST_OPS, TOLERANCES, ...)

    def program_source(self) -> str:
        return (
            f"{HEAD}import triton\n\nfrom {self.module} import {self.function}\n\n\nclass ModelNew(nn.Module):\n"
            f"    def forward(self, {self.args}):\n" + _indent(self.body) + "\n"
        )

    def inputs_source(self) -> str:
        sizes = "".join(f"{k} = {v}\n" for k, v in self.sizes.items())
        return (
            f'"""Inputs of the wild kernel {self.name} ({self.module}.{self.function}), at the bench size."""\n\n'
            f"{HEAD}\n{sizes}\n\ndef get_inputs():\n    return {self.inputs}\n\n{self.extra}"
        )

    def pytorch_source(self) -> str:
        """The same inputs with PyTorch's own op as the reference (for `classify`, not for the bench)."""
        return self.inputs_source() + (
            f"\n\nclass Model(nn.Module):\n    def forward(self, {self.args}):\n" + _indent(self.reference) + "\n"
        )


def _indent(body: str) -> str:
    return "\n".join("        " + line for line in body.strip().splitlines())


def _call(call: str) -> str:
    return f"return {call}"


def _gems(name, module, function, args, call, reference, sizes, inputs, extra="") -> WildKernel:
    return WildKernel(
        name,
        "flag_gems",
        "flag_gems",
        f"flag_gems.ops.{module}",
        function,
        args,
        _call(call),
        _call(reference),
        sizes,
        inputs,
        extra,
    )


MN = {"M": 4096, "N": 4096}
X = "[torch.randn(M, N)]"
XY = "[torch.randn(M, N), torch.randn(M, N)]"


def catalogue() -> tuple[WildKernel, ...]:
    """Every wild kernel, in a fixed order (the suite's instance order)."""
    g = _gems
    k = [
        g("gems_softmax", "softmax", "softmax", "x", "softmax(x, 1)", "torch.softmax(x, 1)", MN, X),
        g("gems_log_softmax", "log_softmax", "log_softmax", "x", "log_softmax(x, 1)", "torch.log_softmax(x, 1)", MN, X),
        g("gems_sum_dim", "sum", "sum_dim", "x", "sum_dim(x, [1])", "x.sum(1)", MN, X),
        g("gems_mean_dim", "mean", "mean_dim", "x", "mean_dim(x, [1])", "x.mean(1)", MN, X),
        g("gems_amax", "amax", "amax", "x", "amax(x, [1])", "x.amax(1)", MN, X),
        g("gems_argmax", "argmax", "argmax", "x", "argmax(x, 1)", "x.argmax(1)", MN, X),
        g("gems_argmin", "argmin", "argmin", "x", "argmin(x, 1)", "x.argmin(1)", MN, X),
        g("gems_max_dim", "max", "max_dim", "x", "max_dim(x, 1)[0]", "x.max(1)[0]", MN, X),
        g("gems_min_dim", "min", "min_dim", "x", "min_dim(x, 1)[0]", "x.min(1)[0]", MN, X),
        g(
            "gems_prod_dim",
            "prod",
            "prod_dim",
            "x",
            "prod_dim(x, 1)",
            "x.prod(1)",
            {"M": 4096, "N": 256},
            "[1.0 + 0.01 * torch.randn(M, N)]",
        ),
        g("gems_cumsum", "cumsum", "cumsum", "x", "cumsum(x, 1)", "x.cumsum(1)", MN, X),
        g("gems_cummax", "cummax", "cummax", "x", "cummax(x, 1)[0]", "x.cummax(1)[0]", MN, X),
        g("gems_cummin", "cummin", "cummin", "x", "cummin(x, 1)[0]", "x.cummin(1)[0]", MN, X),
        g("gems_triu", "triu", "triu", "x", "triu(x, 1)", "x.triu(1)", MN, X),
        g("gems_tril", "tril", "tril", "x", "tril(x, -1)", "x.tril(-1)", MN, X),
        g(
            "gems_layer_norm",
            "layernorm",
            "layer_norm",
            "x, w, b",
            "layer_norm(x, [x.shape[-1]], w, b, 1e-5)[0]",
            "F.layer_norm(x, (N,), w, b, 1e-5)",
            MN,
            "[torch.randn(M, N), torch.randn(N), torch.randn(N)]",
        ),
        g(
            "gems_rms_norm",
            "rms_norm",
            "rms_norm",
            "x, w",
            "rms_norm(x, [x.shape[-1]], w, 1e-6)",
            "F.rms_norm(x, (N,), w, 1e-6)",
            MN,
            "[torch.randn(M, N), torch.randn(N)]",
        ),
        g(
            "gems_group_norm",
            "groupnorm",
            "group_norm",
            "x, w, b",
            "group_norm(x, w, b, x.shape[0], x.shape[1], x.shape[2] * x.shape[3], 8, 1e-5)[0]",
            "F.group_norm(x, 8, w, b, 1e-5)",
            {"B": 32, "C": 256, "H": 64, "W": 64},
            "[torch.randn(B, C, H, W), torch.randn(C), torch.randn(C)]",
        ),
        g(
            "gems_weight_norm",
            "weightnorm",
            "weight_norm_interface",
            "v, g",
            "weight_norm_interface(v, g, 0)[0]",
            "torch._weight_norm(v, g, 0)",
            MN,
            "[torch.randn(M, N), torch.rand(M, 1) + 0.5]",
        ),
        g(
            "gems_embedding",
            "embedding",
            "embedding",
            "i, w",
            "embedding(w, i)",
            "F.embedding(i, w)",
            {"B": 64, "S": 512, "V": 32000, "D": 1024},
            "[torch.randint(0, V, (B, S)), torch.randn(V, D)]",
        ),
        g("gems_topk", "topk", "topk", "x", "topk(x, 8, -1)[0]", "torch.topk(x, 8, -1)[0]", MN, X),
        g(
            "gems_sort",
            "sort",
            "sort",
            "x",
            "sort(x, -1)[0]",
            "torch.sort(x, -1)[0]",
            {"M": 4096, "N": 1024},
            X,
            "# the radix sort takes the exclusive prefix of its kernel's digit histogram on the host\n"
            "HOST_OPS = ('cumsum', 'sub')\n",
        ),
        g(
            "gems_vector_norm",
            "vector_norm",
            "vector_norm",
            "x",
            "vector_norm(x, 2, [1])",
            "torch.linalg.vector_norm(x, 2, [1])",
            MN,
            X,
        ),
        g("gems_var", "var", "var", "x", "var(x, [1])", "x.var(1)", MN, X),
        g("gems_std", "std", "std", "x", "std(x, [1])", "x.std(1)", MN, X),
        g(
            "gems_count_nonzero",
            "count_nonzero",
            "count_nonzero",
            "x",
            "count_nonzero(x, 1)",
            "torch.count_nonzero(x, 1)",
            MN,
            "[torch.relu(torch.randn(M, N))]",
        ),
        g(
            "gems_index_select",
            "index_select",
            "index_select",
            "x, i",
            "index_select(x, 0, i)",
            "torch.index_select(x, 0, i)",
            {**MN, "L": 2048},
            "[torch.randn(M, N), torch.randint(0, M, (L,))]",
        ),
        g(
            "gems_gather",
            "gather",
            "gather",
            "x, i",
            "gather(x, 1, i)",
            "torch.gather(x, 1, i)",
            {**MN, "L": 1024},
            "[torch.randn(M, N), torch.randint(0, N, (M, L))]",
        ),
        g(
            "gems_index_add",
            "index_add",
            "index_add",
            "x, i, s",
            "index_add(x, 0, i, s)",
            "x.index_add(0, i, s)",
            {**MN, "L": 1024},
            "[torch.randn(M, N), torch.randperm(M)[:L], torch.randn(L, N)]",
            "# the wrapper checks the indices on the host before its kernel runs\n"
            "HOST_OPS = ('ge', 'lt', 'mul', 'ones', 'equal')\n",
        ),
        g(
            "gems_mm",
            "mm",
            "mm",
            "a, b",
            "mm(a, b)",
            "a @ b",
            {"M": 2048, "K": 2048, "N": 2048},
            "[torch.randn(M, K), torch.randn(K, N)]",
        ),
        g(
            "gems_bmm",
            "bmm",
            "bmm",
            "a, b",
            "bmm(a, b)",
            "torch.bmm(a, b)",
            {"B": 16, "M": 512, "K": 512, "N": 512},
            "[torch.randn(B, M, K), torch.randn(B, K, N)]",
        ),
        g(
            "gems_addmm",
            "addmm",
            "addmm",
            "c, a, b",
            "addmm(c, a, b)",
            "torch.addmm(c, a, b)",
            {"M": 2048, "K": 2048, "N": 2048},
            "[torch.randn(N), torch.randn(M, K), torch.randn(K, N)]",
        ),
        g(
            "gems_baddbmm",
            "baddbmm",
            "baddbmm",
            "c, a, b",
            "baddbmm(c, a, b)",
            "torch.baddbmm(c, a, b)",
            {"B": 16, "M": 512, "K": 512, "N": 512},
            "[torch.randn(B, M, N), torch.randn(B, M, K), torch.randn(B, K, N)]",
        ),
        g("gems_mv", "mv", "mv", "a, v", "mv(a, v)", "torch.mv(a, v)", MN, "[torch.randn(M, N), torch.randn(N)]"),
        g(
            "gems_addmv",
            "addmv",
            "addmv",
            "c, a, v",
            "addmv(c, a, v)",
            "torch.addmv(c, a, v)",
            MN,
            "[torch.randn(M), torch.randn(M, N), torch.randn(N)]",
        ),
        g(
            "gems_dot",
            "dot",
            "dot",
            "x, y",
            "dot(x, y)",
            "torch.dot(x, y)",
            {"N": 1 << 24},
            "[torch.randn(N), torch.randn(N)]",
        ),
        g(
            "gems_vdot",
            "vdot",
            "vdot",
            "x, y",
            "vdot(x, y)",
            "torch.vdot(x, y)",
            {"N": 1 << 24},
            "[torch.randn(N), torch.randn(N)]",
        ),
        g("gems_trace", "trace", "trace", "x", "trace(x)", "torch.trace(x)", MN, X),
        g("gems_diag", "diag", "diag", "x", "diag(x, 0)", "torch.diag(x, 0)", MN, X),
        g(
            "gems_kron",
            "kron",
            "kron",
            "a, b",
            "kron(a, b)",
            "torch.kron(a, b)",
            {"P": 64, "Q": 64},
            "[torch.randn(P, Q), torch.randn(P, Q)]",
        ),
        g("gems_repeat", "repeat", "repeat", "x", "repeat(x, [2, 3])", "x.repeat(2, 3)", {"M": 2048, "N": 2048}, X),
        g("gems_tile", "tile", "tile", "x", "tile(x, [3, 2])", "torch.tile(x, (3, 2))", {"M": 2048, "N": 2048}, X),
        g("gems_flip", "flip", "flip", "x", "flip(x, [1])", "torch.flip(x, [1])", MN, X),
        g("gems_roll", "roll", "roll", "x", "roll(x, [3], [1])", "torch.roll(x, 3, 1)", MN, X),
        g("gems_cat", "cat", "cat", "x, y", "cat([x, y], 1)", "torch.cat([x, y], 1)", MN, XY),
        g("gems_stack", "stack", "stack", "x, y", "stack([x, y], 0)", "torch.stack([x, y], 0)", MN, XY),
        g(
            "gems_pad",
            "pad",
            "pad",
            "x",
            "pad(x, [1, 2, 3, 4], 'constant', 0.0)",
            "F.pad(x, (1, 2, 3, 4))",
            MN,
            X,
        ),
        g("gems_glu", "glu", "glu", "x", "glu(x, -1)", "F.glu(x, -1)", MN, X),
        g("gems_hardsigmoid", "hardsigmoid", "hardsigmoid", "x", "hardsigmoid(x)", "F.hardsigmoid(x)", MN, X),
        g("gems_mse_loss", "mse_loss", "mse_loss", "x, y", "mse_loss(x, y)", "F.mse_loss(x, y)", MN, XY),
        g(
            "gems_nll_loss",
            "nllloss",
            "nll_loss_forward",
            "x, t",
            "nll_loss_forward(x, t)[0]",
            "F.nll_loss(x, t)",
            {"M": 4096, "C": 1024},
            "[torch.randn(M, C).log_softmax(-1), torch.randint(0, C, (M,))]",
        ),
        g(
            "gems_avg_pool2d",
            "avg_pool2d",
            "avg_pool2d",
            "x",
            "avg_pool2d(x, [2, 2])",
            "F.avg_pool2d(x, 2)",
            {"B": 32, "C": 64, "H": 128, "W": 128},
            "[torch.randn(B, C, H, W)]",
        ),
        g(
            "gems_upsample_nearest2d",
            "upsample_nearest2d",
            "upsample_nearest2d",
            "x",
            "upsample_nearest2d(x, [2 * x.shape[2], 2 * x.shape[3]])",
            "F.interpolate(x, scale_factor=2, mode='nearest')",
            {"B": 32, "C": 64, "H": 64, "W": 64},
            "[torch.randn(B, C, H, W)]",
        ),
        g(
            "gems_masked_fill",
            "masked_fill",
            "masked_fill",
            "x, m",
            "masked_fill(x, m, 0.5)",
            "x.masked_fill(m, 0.5)",
            MN,
            "[torch.randn(M, N), torch.randn(M, N) > 0]",
        ),
        g(
            "gems_aminmax",
            "aminmax",
            "aminmax",
            "x",
            "tuple(aminmax(x, dim=1))",
            "tuple(torch.aminmax(x, dim=1))",
            MN,
            X,
        ),
        WildKernel(
            "tk_add_vectors",
            "triton_kernels",
            "triton_kernels",
            "triton_kernels.add_vectors",
            "add_vectors",
            "x, y",
            "out = torch.empty_like(x)\nn = x.numel()\n"
            "add_vectors[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)\nreturn out",
            "return x + y",
            {"N": 1 << 26},
            "[torch.randn(N), torch.randn(N)]",
        ),
        WildKernel(
            "tk_rotary_embedding",
            "triton_kernels",
            "triton_kernels",
            "triton_kernels.rotary_embedding",
            "rotary_embedding_kernel",
            "pos, q, k, cache",
            "q, k = q.clone(), k.clone()\nT, H, D = q.shape\n"
            "rotary_embedding_kernel[(T,)](pos, q, k, cache, q.stride(0), k.stride(0), q.stride(1), H, k.shape[1],"
            " D, D, IS_NEOX=True, DO_KEY_ROPE=True, BLOCK_SIZE_ROT=256)\nreturn q, k",
            "half = q.shape[-1] // 2\ncos, sin = cache[pos, None, :half], cache[pos, None, half:]\n"
            "def rot(t):\n    a, b = t[..., :half], t[..., half:]\n"
            "    return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)\nreturn rot(q), rot(k)",
            {"T": 4096, "H": 32, "KV": 8, "D": 128, "P": 8192},
            "[torch.randint(0, P, (T,)), torch.randn(T, H, D), torch.randn(T, KV, D), torch.randn(P, D)]",
        ),
    ]
    return tuple(k)


# --- the disjointness rule


def under_expert_prefix(module: str) -> bool:
    return any(module == p.rstrip(".") or module.startswith(p.rstrip(".") + ".") for p in EXPERT_MODULE_PREFIXES)


def _source_file(module: str) -> Path | None:
    """The installed Python file of `module`, found without importing it or its parent packages: importing FlagGems
    asks the GPU its name, which fails without one outside a candidate process (klineage.cuda_on_cpu)."""
    found = module_file(module)
    return found if found is not None and found.suffix == ".py" else None


def module_source(module: str) -> str | None:
    """The installed source of `module` (a copy a program carries, rewritable), read without importing it."""
    from klineage.policy.names import installed_source

    return installed_source(module)


def imported_modules(module: str, package: str, limit: int = 400) -> set[str]:
    """The modules `module` takes names from, directly or through the modules of its own `package` it imports,
    read from the installed files' syntax (nothing is imported). Modules of other packages are listed, not followed;
    a package's `__init__` is listed, not followed: it imports the whole package (FlagGems's imports its fused ops
    too), while a kernel a module launches is defined in the module it is imported from."""
    seen: set[str] = set()
    todo = [module]
    while todo and len(seen) < limit:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _source_file(name)
        if path is None or (path.name == "__init__.py" and name != module):
            continue
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, path)
                found = [base] + [f"{base}.{a.name}" for a in node.names]
            for f in found:
                if not f:
                    continue
                if f == package or f.startswith(package + "."):
                    if _source_file(f):
                        todo.append(f)
                else:
                    seen.add(f)
    return seen


def _absolute(node: ast.ImportFrom, importer: str, path: Path) -> str:
    if not node.level:
        return node.module or ""
    parts = importer.split(".")
    package = parts if path.name == "__init__.py" else parts[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def rule_violations(kernel: WildKernel) -> list[str]:
    """Why `kernel` breaks the disjointness rule (nothing: it obeys it). Its module, and every module of its package
    that it imports (where its `@triton.jit` functions could come from), must be under no expert prefix; its
    program imports nothing else of an expert package."""
    found = []
    if under_expert_prefix(kernel.module):
        found.append(f"{kernel.module} is under an expert prefix")
    for line in kernel.program_source().splitlines():
        m = re.match(r"\s*(?:from|import)\s+([\w.]+)", line)
        if m and under_expert_prefix(m.group(1)):
            found.append(f"the program imports {m.group(1)}")
    if _source_file(kernel.module) is not None:
        found += [
            f"{kernel.module} imports {m}"
            for m in sorted(imported_modules(kernel.module, kernel.package))
            if under_expert_prefix(m)
        ]
    return found


# --- writing the suite


def installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Written:
    """A kernel's files in the data directory: the program, its inputs file and the PyTorch-op workload."""

    kernel: WildKernel
    program: Path
    inputs: Path
    pytorch: Path


def write(kernel: WildKernel, data_dir: Path) -> Written:
    folder = Path(data_dir) / "wild" / kernel.name
    folder.mkdir(parents=True, exist_ok=True)
    # the program is named after the kernel: its name names the self-reference workload's folder and the report's rows
    program, inputs, pytorch = folder / f"{kernel.name}.py", folder / "inputs.py", folder / "pytorch.py"
    for path, text in (
        (program, kernel.program_source()),
        (inputs, kernel.inputs_source()),
        (pytorch, kernel.pytorch_source()),
    ):
        if not path.is_file() or path.read_text() != text:  # rewritten only when changed: hashes stay put
            path.write_text(text)
    return Written(kernel, program, inputs, pytorch)


def chosen(kernels: tuple[WildKernel, ...] | None = None) -> tuple[list[WildKernel], dict[str, str]]:
    """The kernels whose package is installed, and for the others why not ("not installed: flag_gems"). A kernel
    breaking the rule is never offered (a test holds every catalogue entry to it)."""
    offered, left = [], {}
    for k in kernels if kernels is not None else catalogue():
        if not installed(k.package):
            left[k.name] = f"not installed: {k.package}"
        elif why := rule_violations(k):
            left[k.name] = "breaks the disjointness rule: " + "; ".join(why)
        else:
            offered.append(k)
    return offered, left
