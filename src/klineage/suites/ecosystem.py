"""Ecosystem experts: kernels of installed, maintained Triton libraries, mined at run time (issue 31, item 5).

Each entry is a frozen record: the installed module(s) whose kernels are walked, a PyTorch reference for `Model`, the
call of the package's own wrapper for `ModelNew`, and a tiny CPU case beside a bench-sized GPU case. `write_expert`
writes the KernelBench-style pair (`workload.py`, `program.py`) into a directory at run time; nothing of the packages
is copied into this repository, and the rewritten copies mining makes live in the user's data directory.

Disjointness: experts come only from modules under `EXPERT_MODULE_PREFIXES` (Liger-Kernel's ops,
flash-linear-attention, FlagGems' fused ops). FlagGems' `flag_gems.ops.*` kernels are never experts: they are the
"wild" evaluation suite, which imports the prefixes to check that no wild instance was mined.

The three experts bundled in `klineage.examples` through Liger-Kernel (rms_norm, swiglu, cross_entropy) are not
repeated here: the catalogue adds experts to those."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from klineage.program import module_file

EXPERT_MODULE_PREFIXES: tuple[str, ...] = ("liger_kernel.ops.", "fla.", "flag_gems.fused.")
WILD_MODULE_PREFIXES: tuple[str, ...] = ("flag_gems.ops.",)  # never experts: the wild suite's kernels

# what each package is called on PyPI (the import name is the record's `package`)
PYPI_NAMES: dict[str, str] = {
    "liger_kernel": "liger-kernel",
    "fla": "flash-linear-attention",
    "flag_gems": "flag-gems",
}

_HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


@dataclass(frozen=True)
class EcosystemExpert:
    """One expert of an installed library. `args` names forward's inputs; `reference` and `program` are forward
    bodies (the reference in plain PyTorch, so it also runs in float64; the program calling the wrapper imported by
    `imports`). `inputs` is an expression over the case's sizes and `randn(*shape)` / `randint(high, *shape)` /
    `probs(*shape)` / `logprobs(*shape)` (drawn in the case's dtype). `cases` holds a "tiny" case for the Triton
    interpreter and a "bench" case for a GPU; `extra` adds workload lines (HOST_OPS, DISTRIBUTIONS, ...)."""

    name: str
    package: str
    modules: tuple[str, ...]
    args: str
    reference: str
    program: str
    imports: str
    inputs: str
    cases: dict[str, dict] = field(hash=False)
    tolerances: dict[str, dict] = field(default_factory=dict, hash=False)
    host_ops: tuple[str, ...] = ()
    extra: str = ""
    note: str = ""
    multiple_of: dict[str, int] = field(default_factory=dict, hash=False)  # sizes the wrapper needs divisible

    def installed(self) -> bool:
        """Whether every module to mine is installed here as a source file. Nothing is imported:
        importing FlagGems on a machine without CUDA raises (it asks for the device name at import)."""
        return all(module_file(m) is not None for m in self.modules)

    def domain(self) -> dict:
        """Each size from its tiny to its bench value (a [low, high] range), or, where the wrapper needs it divisible
        (`multiple_of`), the listed multiples from the tiny value to eight times it and the bench value: the
        correctness gate draws an extra case from this domain, so it must hold only shapes the op is defined on."""
        tiny, bench = self.cases["tiny"], self.cases["bench"]
        out: dict = {}
        for k in (k for k in tiny if k != "dtype"):
            low, high = min(tiny[k], bench[k]), max(tiny[k], bench[k])
            m = self.multiple_of.get(k)
            out[k] = [low, high] if m is None else [*range(low, min(high, 8 * low) + 1, m), high]
        out["dtype"] = sorted({c["dtype"] for c in self.cases.values()})
        return out

    def workload_source(self) -> str:
        sizes = [k for k in self.cases["tiny"] if k != "dtype"]
        unpack = "".join(f"    {k} = case[{k!r}]\n" for k in sizes)
        host = f"HOST_OPS = {self.host_ops!r}\n" if self.host_ops else ""
        return (
            f'"""{self.name}: {self.note or "an ecosystem expert"} Written by klineage.suites.ecosystem at run time;'
            f' the program calls {self.package}."""\n\n{_HEAD}\n'
            f"CASES = {self.cases!r}\nDOMAIN = {self.domain()!r}\nTOLERANCES = {self.tolerances!r}\n{host}"
            f"{self.extra}\n\n"
            f"class Model(nn.Module):\n{_forward(self.reference, self.args)}\n\n"
            "def make_inputs(case, seed):\n"
            "    g = torch.Generator().manual_seed(seed)\n"
            '    dtype = getattr(torch, case["dtype"])\n\n'
            "    def randn(*shape):\n        return torch.randn(*shape, generator=g).to(dtype)\n\n"
            "    def randint(high, *shape):\n        return torch.randint(0, high, shape, generator=g)\n\n"
            "    def probs(*shape):\n        return torch.randn(*shape, generator=g).softmax(-1).to(dtype)\n\n"
            "    def logprobs(*shape):\n        return torch.randn(*shape, generator=g).log_softmax(-1).to(dtype)\n\n"
            f"{unpack}    return {self.inputs}\n\n\n"
            'def get_inputs():\n    return make_inputs(CASES["bench"], 0)\n\n\n'
            "def get_init_inputs():\n    return []\n"
        )

    def program_source(self) -> str:
        return f"{_HEAD}{self.imports}\n\n\nclass ModelNew(nn.Module):\n{_forward(self.program, self.args)}"


def _forward(body: str, args: str) -> str:
    return f"    def forward(self, {args}):\n        " + body.strip().replace("\n", "\n        ") + "\n"


def _rows(m: int, n: int, bm: int = 8192, bn: int = 4096, dtype: str = "float32") -> dict[str, dict]:
    return {"tiny": {"M": m, "N": n, "dtype": "float32"}, "bench": {"M": bm, "N": bn, "dtype": dtype}}


def _cases(tiny: dict, bench: dict) -> dict[str, dict]:
    return {"tiny": {**tiny, "dtype": "float32"}, "bench": {**bench, "dtype": "float32"}}


_REDUCED_LOSS = "the wrapper's final reduction of per-row losses, on the host"
# probabilities stay probabilities only when the harness does not redraw them from other distributions
_PROBS_ONLY = 'DISTRIBUTIONS = ("normal",)  # inputs are (log-)probabilities; a redraw would leave the simplex\n'

L, A, G = "liger_kernel", "fla", "flag_gems"


def _catalogue() -> tuple[EcosystemExpert, ...]:
    E = EcosystemExpert
    return (
        # --- Liger-Kernel (liger_kernel.ops.*): autograd Functions, called as Liger's modules call them
        E(
            "liger_layer_norm",
            L,
            ("liger_kernel.ops.layer_norm",),
            "x, w, b",
            "return F.layer_norm(x, (x.shape[-1],), w, b, 1e-6)",
            "return LigerLayerNormFunction.apply(x, w, b, 1e-6)",
            "from liger_kernel.ops.layer_norm import LigerLayerNormFunction",
            "[randn(M, N), randn(N), randn(N)]",
            _rows(6, 40),
            note="LayerNorm over the last dimension.",
        ),
        E(
            "liger_geglu",
            L,
            ("liger_kernel.ops.geglu",),
            "a, b",
            "return F.gelu(a, approximate='tanh') * b",
            "return LigerGELUMulFunction.apply(a, b)",
            "from liger_kernel.ops.geglu import LigerGELUMulFunction",
            "[randn(M, N), randn(M, N)]",
            _rows(6, 40, 8192, 14336),
            note="GeGLU: tanh-GELU of the gate times the up projection.",
        ),
        E(
            "liger_dyt",
            L,
            ("liger_kernel.ops.dyt",),
            "x, alpha, g, b",
            "return g * torch.tanh(alpha * x) + b",
            "return LigerDyTFunction.apply(x, alpha, g, b)",
            "from liger_kernel.ops.dyt import LigerDyTFunction",
            "[randn(M, N), randn(1), randn(N), randn(N)]",
            _rows(6, 40),
            note="Dynamic tanh (DyT), a normalization-free replacement for LayerNorm.",
        ),
        E(
            "liger_softmax",
            L,
            ("liger_kernel.ops.softmax",),
            "x",
            "return torch.softmax(x, -1)",
            "return LigerSoftmaxFunction.apply(x)",
            "from liger_kernel.ops.softmax import LigerSoftmaxFunction",
            "[randn(M, N)]",
            _rows(6, 40, 8192, 32000),
            note="Row softmax.",
        ),
        E(
            "liger_group_norm",
            L,
            ("liger_kernel.ops.group_norm",),
            "x, w, b",
            "return F.group_norm(x, 4, w, b, 1e-6)",
            "return LigerGroupNormFunction.apply(x, w, b, x.shape[1], 4, 1e-6)",
            "from liger_kernel.ops.group_norm import LigerGroupNormFunction",
            "[randn(B, C, S), randn(C), randn(C)]",
            _cases({"B": 2, "C": 8, "S": 10}, {"B": 32, "C": 128, "S": 4096}),
            multiple_of={"C": 4},
            note="GroupNorm with 4 groups.",
        ),
        E(
            "liger_kl_div",
            L,
            ("liger_kernel.ops.kl_div",),
            "x, t",
            "return F.kl_div(x, t, reduction='batchmean', log_target=True)",
            "return LigerKLDivLossFunction.apply(x, t, 'batchmean', True)",
            "from liger_kernel.ops.kl_div import LigerKLDivLossFunction",
            "[logprobs(M, N), logprobs(M, N)]",
            _rows(4, 40, 8192, 32000),
            host_ops=("sum", "div"),
            extra=_PROBS_ONLY,
            note=f"KL divergence of log-space distributions, batch mean; {_REDUCED_LOSS}.",
        ),
        E(
            "liger_jsd",
            L,
            ("liger_kernel.ops.jsd",),
            "x, t",
            "m = 0.5 * (x.exp() + t.exp())\n"
            "return 0.5 * ((x.exp() * (x - m.log())).sum() + (t.exp() * (t - m.log())).sum()) / x.shape[0]",
            "return LigerJSDFunction.apply(x, t)",
            "from liger_kernel.ops.jsd import LigerJSDFunction",
            "[logprobs(M, N), logprobs(M, N)]",
            _rows(4, 40, 8192, 32000),
            host_ops=("sum", "div"),
            extra=_PROBS_ONLY,
            note=f"Jensen-Shannon divergence of log-space distributions; {_REDUCED_LOSS}.",
        ),
        E(
            "liger_tvd",
            L,
            ("liger_kernel.ops.tvd",),
            "p, q",
            "return 0.5 * (p - q).abs().sum() / p.shape[0]",
            "return LigerTVDLossFunction.apply(p, q)",
            "from liger_kernel.ops.tvd import LigerTVDLossFunction",
            "[probs(M, N), probs(M, N)]",
            _rows(4, 40, 8192, 32000),
            host_ops=("sum",),
            extra=_PROBS_ONLY,
            note="Total variation distance of two distributions, batch mean; the wrapper sums per-row losses.",
        ),
        E(
            "liger_fused_add_rms_norm",
            L,
            ("liger_kernel.ops.fused_add_rms_norm",),
            "x, r, w",
            "h = x + r\nreturn h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w, h",
            "return LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6)",
            "from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction",
            "[randn(M, N), randn(M, N), randn(N)]",
            _rows(6, 40),
            note="Residual add then RMSNorm, both results returned.",
        ),
        E(
            "liger_relu_squared",
            L,
            ("liger_kernel.ops.relu_squared",),
            "x",
            "return torch.relu(x) ** 2",
            "return LigerReLUSquaredFunction.apply(x)",
            "from liger_kernel.ops.relu_squared import LigerReLUSquaredFunction",
            "[randn(M, N)]",
            _rows(6, 40, 8192, 14336),
            note="Squared ReLU (Primer).",
        ),
        E(
            "liger_poly_norm",
            L,
            ("liger_kernel.ops.poly_norm",),
            "x, w, b",
            "def n(u):\n    return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + 1e-6)\n"
            "return w[0] * n(x ** 3) + w[1] * n(x ** 2) + w[2] * n(x) + b",
            "return LigerPolyNormFunction.apply(x, w, b, 1e-6)",
            "from liger_kernel.ops.poly_norm import LigerPolyNormFunction",
            "[randn(M, N), randn(3), randn(1)]",
            _rows(6, 40),
            extra='DISTRIBUTIONS = ("normal", "uniform_signed")  # x**6 of heavy tails overflows float32\n',
            note="PolyNorm: weighted RMS norms of x, x**2, x**3 plus a bias.",
        ),
        # --- flash-linear-attention (fla.*): the ops' forward host wrappers
        E(
            "fla_l2norm",
            A,
            ("fla.modules.norm.l2norm",),
            "x",
            "return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)",
            "return l2norm_fwd(x, 1e-6)[0]",
            "from fla.modules.norm.l2norm import l2norm_fwd",
            "[randn(M, N)]",
            _rows(6, 40, 8192, 4096),
            note="L2 normalization of rows.",
        ),
        E(
            "fla_layer_norm",
            A,
            ("fla.modules.norm.layernorm",),
            "x, w, b",
            "return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)",
            "return layer_norm_fwd(x, w, b, 1e-5)[0]",
            "from fla.modules.norm.layernorm import layer_norm_fwd",
            "[randn(M, N), randn(N), randn(N)]",
            _rows(6, 40),
            note="LayerNorm over the last dimension (fla's fused norm kernel).",
        ),
        E(
            "fla_logsumexp",
            A,
            ("fla.ops.utils.logsumexp",),
            "x",
            "return torch.logsumexp(x, -1)",
            "return logsumexp_fwd(x)",
            "from fla.ops.utils.logsumexp import logsumexp_fwd",
            "[randn(M, N)]",
            _rows(6, 40, 8192, 32000),
            host_ops=("logsumexp",),
            note="Row logsumexp; the wrapper reduces per-block partial results on the host.",
        ),
        E(
            "fla_softmax",
            A,
            ("fla.ops.utils.softmax",),
            "x",
            "return torch.softmax(x, -1)",
            "return softmax_fwd(x)",
            "from fla.ops.utils.softmax import softmax_fwd",
            "[randn(M, N)]",
            _rows(6, 40, 8192, 4096),
            note="Row softmax.",
        ),
        E(
            "fla_chunk_local_cumsum",
            A,
            ("fla.ops.utils.cumsum",),
            "x",
            "B, T, H = x.shape\nreturn x.view(B, T // 16, 16, H).cumsum(2).view(B, T, H)",
            "return chunk_local_cumsum(x, 16)",
            "from fla.ops.utils.cumsum import chunk_local_cumsum",
            "[randn(B, T, H)]",
            _cases({"B": 2, "T": 32, "H": 3}, {"B": 8, "T": 4096, "H": 32}),
            multiple_of={"T": 16},
            note="Cumulative sum within chunks of 16 time steps (linear attention's gate cumsum).",
        ),
        E(
            "fla_mean_pooling",
            A,
            ("fla.ops.utils.pooling",),
            "x",
            "B, T, H, D = x.shape\nreturn x.view(B, T // 16, 16, H, D).mean(2)",
            "return mean_pooling_fwd(x, 16)",
            "from fla.ops.utils.pooling import mean_pooling_fwd",
            "[randn(B, T, H, D)]",
            _cases({"B": 2, "T": 32, "H": 2, "D": 16}, {"B": 8, "T": 4096, "H": 16, "D": 128}),
            multiple_of={"T": 16},
            note="Mean over chunks of 16 time steps.",
        ),
        E(
            "fla_token_shift",
            A,
            ("fla.modules.token_shift",),
            "x",
            "return F.pad(x, (0, 0, 1, -1)) - x",
            "return token_shift(x)",
            "from fla.modules.token_shift import token_shift",
            "[randn(B, T, D)]",
            _cases({"B": 2, "T": 12, "D": 24}, {"B": 8, "T": 4096, "D": 2048}),
            note="RWKV token shift: the previous time step minus the current one.",
        ),
        E(
            "fla_swiglu",
            A,
            ("fla.modules.activations.ops",),
            "a, b",
            "return F.silu(a) * b",
            "return swiglu_fwd(a, b)",
            "from fla.modules.activations.ops import swiglu_fwd",
            "[randn(M, N), randn(M, N)]",
            _rows(6, 40, 8192, 14336),
            note="SwiGLU through fla's activation kernels.",
        ),
        E(
            "fla_logsigmoid",
            A,
            ("fla.modules.activations.ops",),
            "x",
            "return F.logsigmoid(x)",
            "return logsigmoid_fwd(x)",
            "from fla.modules.activations.ops import logsigmoid_fwd",
            "[randn(M, N)]",
            _rows(6, 40, 8192, 4096),
            note="Log-sigmoid (gated linear attention's gate activation).",
        ),
        # --- FlagGems' fused ops (flag_gems.fused.*), called directly
        E(
            "gems_cross_entropy",
            G,
            ("flag_gems.fused.cross_entropy_loss",),
            "x, t",
            "return F.cross_entropy(x, t)",
            "return cross_entropy_loss(x, t)",
            "from flag_gems.fused.cross_entropy_loss import cross_entropy_loss",
            "[randn(M, N), randint(N, M)]",
            _rows(6, 40, 8192, 32000),
            note="Mean cross-entropy over class indices.",
        ),
        E(
            "gems_skip_layer_norm",
            G,
            ("flag_gems.fused.skip_layernorm",),
            "x, r, w, b",
            "return F.layer_norm(x + r, (x.shape[-1],), w, b, 1e-5)",
            "return skip_layer_norm(x, r, [x.shape[-1]], w, b, 1e-5)",
            "from flag_gems.fused.skip_layernorm import skip_layer_norm",
            "[randn(M, N), randn(M, N), randn(N), randn(N)]",
            _rows(6, 40),
            note="Residual (skip) add then LayerNorm.",
        ),
        E(
            "gems_geglu",
            G,
            ("flag_gems.fused.geglu",),
            "x",
            "a, b = x.chunk(2, -1)\nreturn F.gelu(a, approximate='tanh') * b",
            "return geglu(x)",
            "from flag_gems.fused.geglu import geglu",
            "[randn(M, N)]",
            _rows(6, 80, 8192, 28672),
            multiple_of={"N": 2},
            note="GeGLU over the two halves of one input.",
        ),
        E(
            "gems_reglu",
            G,
            ("flag_gems.fused.reglu",),
            "x",
            "a, b = x.chunk(2, -1)\nreturn torch.relu(a) * b",
            "return reglu(x)",
            "from flag_gems.fused.reglu import reglu",
            "[randn(M, N)]",
            _rows(6, 80, 8192, 28672),
            multiple_of={"N": 2},
            note="ReGLU over the two halves of one input.",
        ),
        E(
            "gems_weight_norm",
            G,
            ("flag_gems.fused.weight_norm",),
            "v, g",
            "return v * g / torch.sqrt((v * v).sum(1, keepdim=True))",
            "return weight_norm_except_dim(v, g, 0)[0]",
            "from flag_gems.fused.weight_norm import weight_norm_except_dim",
            "[randn(M, N), randn(M, 1)]",
            _rows(6, 40),
            note="Weight normalization: each row of v scaled to the norm g.",
        ),
        E(
            "gems_moe_sum",
            G,
            ("flag_gems.fused.moe_sum",),
            "x",
            "return x.sum(1)",
            "out = torch.empty(x.shape[0], x.shape[2], dtype=x.dtype, device=x.device)\nmoe_sum(x, out)\nreturn out",
            "from flag_gems.fused.moe_sum import moe_sum",
            "[randn(T, K, H)]",
            _cases({"T": 6, "K": 2, "H": 40}, {"T": 8192, "K": 8, "H": 4096}),
            note="Sum of the top-k experts' outputs per token.",
        ),
    )


ECOSYSTEM: dict[str, EcosystemExpert] = {e.name: e for e in _catalogue()}


def is_expert_module(module: str) -> bool:
    """Whether `module` may hold experts: under an expert prefix and under no wild prefix."""
    return module.startswith(EXPERT_MODULE_PREFIXES) and not module.startswith(WILD_MODULE_PREFIXES)


def select(names: list[str] | None = None) -> list[EcosystemExpert]:
    """The catalogue's experts named (all when `names` is empty), in catalogue order; an unknown name is a
    `KeyError` naming it and the known ones."""
    if not names:
        return list(ECOSYSTEM.values())
    unknown = [n for n in names if n not in ECOSYSTEM]
    if unknown:
        raise KeyError(f"unknown ecosystem expert {', '.join(unknown)}: expected some of {', '.join(ECOSYSTEM)}")
    return [ECOSYSTEM[n] for n in dict.fromkeys(names)]


def write_expert(expert: EcosystemExpert, folder: Path) -> tuple[Path, Path]:
    """Write the expert's `workload.py` and `program.py` into `folder` (made if missing); (workload, program)."""
    folder.mkdir(parents=True, exist_ok=True)
    workload, program = folder / "workload.py", folder / "program.py"
    workload.write_text(expert.workload_source())
    program.write_text(expert.program_source())
    return workload, program


def expert_pair(expert: EcosystemExpert, settings) -> tuple:
    """The expert's pair written under `<data dir>/ecosystem/<name>` and loaded: (workload, program with its
    installed modules)."""
    from klineage.program import load_program, with_installed_modules
    from klineage.workload import load_workload

    workload_path, program_path = write_expert(expert, settings.data_dir / "ecosystem" / expert.name)
    return load_workload(workload_path), with_installed_modules(load_program(program_path), list(expert.modules))


# --- mining the catalogue -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EcosystemRow:
    """What mining one ecosystem expert gave: `status` "mined", "not installed" or "error" (with `error`);
    `rejected_by` counts rejected steps by their first failing gate and code ("correctness:mismatch"); `families`
    maps each family number of an accepted step to its transforms; `walk_s` is the backward walk, `wall_s` the walk
    with its probes and skills."""

    name: str
    package: str
    modules: tuple[str, ...]
    status: str
    lineage: str = ""
    finished: bool = False
    accepted: int = 0
    rejected: int = 0
    rejected_by: dict[str, int] = field(default_factory=dict)
    families: dict[int, list[str]] = field(default_factory=dict)
    skills: int = 0
    guards: int = 0
    walk_s: float = 0.0
    wall_s: float = 0.0
    error: str = ""


def rejection(step) -> str:
    """A rejected step's first failing gate and code, "gate:code" ("rejected" where every gate passed)."""
    failed = next((v for v in step.verdicts if v["status"] != "pass"), None)
    return f"{failed['gate']}:{failed['code'] or failed['status']}" if failed else "rejected"


def mine_expert(
    expert: EcosystemExpert,
    library,
    settings,
    device: str,
    walk_device: str | None = None,
    *,
    sandbox=None,
    max_steps: int | None = None,
    probe: bool = True,
    on_step=None,
    on_phase=None,
) -> EcosystemRow:
    """Write the expert's pair under `<data dir>/ecosystem/<name>` and mine it into `library` with its modules
    (klineage.mining.mine_into; `walk_device` as there: a walk finished on the CPU, timed on `device`). A package
    that is not installed is a row saying so; any other failure is a row with its error, so one expert never stops a
    catalogue run."""
    import time

    from klineage.mining import mine_into
    from klineage.transform import TRANSFORMS, load_families

    base = {"name": expert.name, "package": expert.package, "modules": expert.modules}
    if not expert.installed():
        return EcosystemRow(**base, status="not installed")
    started = time.perf_counter()
    walked: list[float] = []

    def phase(text: str) -> None:
        if not walked and text.startswith(("timing", "probing")):
            walked.append(time.perf_counter() - started)
        if on_phase:
            on_phase(text)

    try:
        workload, program = expert_pair(expert, settings)
        lineage, _, skills = mine_into(
            library,
            workload,
            program,
            settings,
            device,
            walk_device,
            probe=probe,
            sandbox=sandbox,
            max_steps=max_steps,
            on_step=on_step,
            on_phase=phase,
        )
    except Exception as e:  # a row, not a crash: the other experts still run
        wall = time.perf_counter() - started
        return EcosystemRow(**base, status="error", error=f"{type(e).__name__}: {str(e)[:300]}", wall_s=wall)
    wall = time.perf_counter() - started
    load_families()
    families: dict[int, list[str]] = {}
    for step in lineage.accepted:
        cls = TRANSFORMS.get(step.transform)
        names = families.setdefault(cls.family if cls else -1, [])
        if step.transform not in names:
            names.append(step.transform)
    rejected_by: dict[str, int] = {}
    for step in lineage.rejected:
        key = rejection(step)
        rejected_by[key] = rejected_by.get(key, 0) + 1
    return EcosystemRow(
        **base,
        status="mined",
        lineage=lineage.id,
        finished=lineage.finished,
        accepted=len(lineage.accepted),
        rejected=len(lineage.rejected),
        rejected_by=dict(sorted(rejected_by.items())),
        families=dict(sorted(families.items())),
        skills=len(skills),
        guards=sum(s.kind == "guard" for s in skills),
        walk_s=round(walked[0] if walked else wall, 1),
        wall_s=round(wall, 1),
    )


def mine_expert_apart(
    name: str,
    settings,
    device: str,
    walk_device: str | None = None,
    max_steps: int | None = None,
    probe: bool = True,
) -> tuple[EcosystemRow, list]:
    """One expert mined on a cluster worker (klineage.scale) into a library of its own, `<data dir>/ecosystem/<name>/
    library`; (its row, its skills). The client saves the skills into the user's library, so only one process
    ever writes that one (the judge owns writes), wherever the workers run."""
    from klineage.library import Library
    from klineage.scale import worker_sandbox

    (expert,) = select([name])
    with Library(settings.data_dir / "ecosystem" / name / "library") as own:
        row = mine_expert(
            expert,
            own,
            settings,
            device,
            walk_device,
            sandbox=worker_sandbox(settings.warm),
            max_steps=max_steps,
            probe=probe,
        )
        return row, own.list()
