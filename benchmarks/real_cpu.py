"""Real Triton kernels from installed packages, checked on the CPU: does their host code start, unchanged?

    GEMS_VENDOR=nvidia PYTHONPATH=src:.:SITE python benchmarks/real_cpu.py [--only NAME,...] [--seeds 2] [--json OUT]

For each kernel below, a KernelBench-style pair is written at run time to a temporary directory (never committed):
a workload whose `Model` is PyTorch's own op and a program whose `ModelNew.forward` calls the installed package's
own wrapper (Liger-Kernel, FlagGems, flash-linear-attention), on small shapes; nothing of the packages is copied,
they are imported. Some programs are written as GPU programs are (`device="cuda"`, `torch.cuda.device(...)`): that
is the host code issue 31 found failing on the CPU. Each pair goes through `check()` (the API behind
`klineage check --device cpu --trusted`) with the correctness gate only (the compile gate needs ptxas time the
2-core machine does not have), and the table says pass/fail, the verdict's code, seconds and what CUDA was mapped.
Prints the command, device, versions and date. A benchmark, not a test: nothing is asserted."""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import sys
import tempfile
import time
from pathlib import Path

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _pair(model: str, model_new: str, inputs: str, init: str = "[]", extra: str = "") -> dict:
    return {"model": model, "new": model_new, "inputs": inputs, "init": init, "extra": extra}


def _forward(body: str, args: str = "x") -> str:
    return f"    def forward(self, {args}):\n        " + body.strip().replace("\n", "\n        ") + "\n"


def _models(ref: str, new: str, args: str = "x", imports: str = "") -> tuple[str, str]:
    model = "class Model(nn.Module):\n" + _forward(ref, args)
    model_new = imports + "\n\nclass ModelNew(nn.Module):\n" + _forward(new, args)
    return model, model_new


def kernels() -> dict[str, tuple[str, dict]]:
    """name -> (package, pair)."""
    k: dict[str, tuple[str, dict]] = {}

    def add(name, package, ref, new, inputs, args="x", imports="", init="[]", extra=""):
        model, model_new = _models(ref, new, args, imports)
        k[name] = (package, _pair(model, model_new, inputs, init, extra))

    # --- Liger-Kernel: autograd Functions, called as the library's modules call them
    L = "liger_kernel"
    add(
        "liger_rms_norm",
        L,
        "return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w",
        "return LigerRMSNormFunction.apply(x, w, 1e-6)",
        "[torch.randn(6, 40), torch.randn(40)]",
        "x, w",
        "from liger_kernel.ops.rms_norm import LigerRMSNormFunction",
    )
    add(
        "liger_layer_norm",
        L,
        "return F.layer_norm(x, (x.shape[-1],), w, b, 1e-6)",
        "return LigerLayerNormFunction.apply(x, w, b, 1e-6)",
        "[torch.randn(6, 40), torch.randn(40), torch.randn(40)]",
        "x, w, b",
        "from liger_kernel.ops.layer_norm import LigerLayerNormFunction",
    )
    add(
        "liger_swiglu",
        L,
        "return F.silu(a) * b",
        "return LigerSiLUMulFunction.apply(a, b)",
        "[torch.randn(6, 40), torch.randn(6, 40)]",
        "a, b",
        "from liger_kernel.ops.swiglu import LigerSiLUMulFunction",
    )
    add(
        "liger_geglu",
        L,
        "return F.gelu(a, approximate='tanh') * b",
        "return LigerGELUMulFunction.apply(a, b)",
        "[torch.randn(6, 40), torch.randn(6, 40)]",
        "a, b",
        "from liger_kernel.ops.geglu import LigerGELUMulFunction",
    )
    add(
        "liger_dyt",
        L,
        "return g * torch.tanh(alpha * x) + b",
        "return LigerDyTFunction.apply(x, alpha, g, b)",
        "[torch.randn(6, 40), torch.tensor([0.7]), torch.randn(40), torch.randn(40)]",
        "x, alpha, g, b",
        "from liger_kernel.ops.dyt import LigerDyTFunction",
    )
    add(
        "liger_softmax",
        L,
        "return torch.softmax(x, -1)",
        "return LigerSoftmaxFunction.apply(x)",
        "[torch.randn(6, 40)]",
        imports="from liger_kernel.ops.softmax import LigerSoftmaxFunction",
    )
    add(
        "liger_group_norm",
        L,
        "return F.group_norm(x, 2, w, b, 1e-6)",
        "return LigerGroupNormFunction.apply(x, w, b, 4, 2, 1e-6)",
        "[torch.randn(3, 4, 10), torch.randn(4), torch.randn(4)]",
        "x, w, b",
        "from liger_kernel.ops.group_norm import LigerGroupNormFunction",
    )
    add(
        "liger_kl_div",
        L,
        "return F.kl_div(x, t, reduction='batchmean', log_target=True)",
        "return LigerKLDivLossFunction.apply(x, t, 'batchmean', True)",
        "[torch.randn(4, 40).log_softmax(-1), torch.randn(4, 40).log_softmax(-1)]",
        "x, t",
        "from liger_kernel.ops.kl_div import LigerKLDivLossFunction",
        extra="HOST_OPS = ('sum', 'div')  # the wrapper's final reduction of per-row losses, on the host\n",
    )
    add(
        "liger_fused_add_rms_norm",
        L,
        "h = x + r\nreturn h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w, h",
        "return LigerFusedAddRMSNormFunction.apply(x, r, w, 1e-6)",
        "[torch.randn(6, 40), torch.randn(6, 40), torch.randn(40)]",
        "x, r, w",
        "from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction",
    )
    # --- FlagGems: the aten-level ops `use_gems()` registers, called directly; written as a GPU program is
    G = "flag_gems"
    gems = "import flag_gems.ops as gems"
    cuda_style = "with torch.cuda.device(x.device):\n    y = {call}\nreturn y"
    for name, ref, call, inputs in [
        ("gems_softmax", "torch.softmax(x, 1)", "gems.softmax(x, 1)", "[torch.randn(6, 40)]"),
        ("gems_log_softmax", "torch.log_softmax(x, 1)", "gems.log_softmax(x, 1)", "[torch.randn(6, 40)]"),
        ("gems_sum_dim", "x.sum(1)", "gems.sum_dim(x, [1])", "[torch.randn(6, 40)]"),
        ("gems_mean_dim", "x.mean(1)", "gems.mean_dim(x, [1])", "[torch.randn(6, 40)]"),
        ("gems_amax", "x.amax(1)", "gems.amax(x, [1])", "[torch.randn(6, 40)]"),
        ("gems_argmax", "x.argmax(1)", "gems.argmax(x, 1)", "[torch.randn(6, 40)]"),
        ("gems_cumsum", "x.cumsum(1)", "gems.cumsum(x, 1)", "[torch.randn(6, 40)]"),
        ("gems_triu", "x.triu(1)", "gems.triu(x, 1)", "[torch.randn(12, 10)]"),
        (
            "gems_layer_norm",
            "F.layer_norm(x, (40,))",
            "gems.layer_norm(x, [40], None, None, 1e-5)[0]",
            "[torch.randn(6, 40)]",
        ),
        (
            "gems_rms_norm",
            "F.rms_norm(x, (40,), w, 1e-6)",
            "gems.rms_norm(x, [40], w, 1e-6)",
            "[torch.randn(6, 40), torch.randn(40)]",
        ),
    ]:
        args = "x, w" if ", w" in call else "x"
        add(name, G, f"return {ref}", cuda_style.format(call=call), inputs, args, gems)
    add(
        "gems_cross_entropy",
        G,
        "return F.cross_entropy(x, t)",
        "with torch.cuda.device(x.device):\n    y = cross_entropy_loss(x, t.cuda())\nreturn y",
        "[torch.randn(6, 40), torch.randint(0, 40, (6,))]",
        "x, t",
        "from flag_gems.fused import cross_entropy_loss",
    )
    add(
        "gems_var_mean",
        G,
        "return torch.var_mean(x, 1)",
        "with torch.cuda.device(x.device):\n    y = gems.var_mean(x, [1])\nreturn y",
        "[torch.randn(6, 40)]",
        imports=gems,
    )
    add(
        "gems_embedding",
        G,
        "return F.embedding(i, w)",
        "with torch.cuda.device(w.device):\n    y = gems.embedding(w, i.cuda())\nreturn y",
        "[torch.randint(0, 20, (5, 3)), torch.randn(20, 24)]",
        "i, w",
        gems,
    )
    add(
        "liger_jsd",
        L,
        "m = 0.5 * (x.exp() + t.exp())\n"
        "return 0.5 * ((x.exp() * (x - m.log())).sum() + (t.exp() * (t - m.log())).sum()) / x.shape[0]",
        "return LigerJSDFunction.apply(x, t)",
        "[torch.randn(4, 40).log_softmax(-1), torch.randn(4, 40).log_softmax(-1)]",
        "x, t",
        "from liger_kernel.ops.jsd import LigerJSDFunction",
        extra="HOST_OPS = ('sum', 'div')  # the wrapper's final reduction of per-row losses, on the host\n",
    )
    # --- flash-linear-attention: the ops' host wrappers
    A = "fla"
    add(
        "fla_l2norm",
        A,
        "return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)",
        "return l2norm_fwd(x, 1e-6)[0]",
        "[torch.randn(6, 40)]",
        imports="from fla.modules.l2norm import l2norm_fwd",
    )
    add(
        "fla_logsumexp",
        A,
        "return torch.logsumexp(x, -1)",
        "return logsumexp_fwd(x)",
        "[torch.randn(6, 40)]",
        imports="from fla.ops.utils.logsumexp import logsumexp_fwd",
        extra="HOST_OPS = ('logsumexp',)  # the wrapper's reduction of per-block partial results, on the host\n",
    )
    add(
        "fla_softmax",
        A,
        "return torch.softmax(x, -1)",
        "return softmax_fwd(x)",
        "[torch.randn(6, 40)]",
        imports="from fla.ops.utils.softmax import softmax_fwd",
    )
    add(
        "fla_chunk_local_cumsum",
        A,
        "B, T, H = x.shape\nreturn x.view(B, T // 16, 16, H).cumsum(2).view(B, T, H)",
        "return chunk_local_cumsum(x, 16)",
        "[torch.randn(2, 32, 3)]",
        imports="from fla.ops.utils.cumsum import chunk_local_cumsum",
    )
    add(
        "fla_mean_pooling",
        A,
        "B, T, H, D = x.shape\nreturn x.view(B, T // 16, 16, H, D).mean(2)",
        "return mean_pooling_fwd(x, 16)",
        "[torch.randn(2, 32, 2, 16)]",
        imports="from fla.ops.utils.pooling import mean_pooling_fwd",
    )
    add(
        "fla_token_shift",
        A,
        "return F.pad(x, (0, 0, 1, -1)) - x",
        "return token_shift(x)",
        "[torch.randn(2, 12, 24)]",
        imports="from fla.modules.token_shift import token_shift",
    )
    add(
        "gems_index_select",
        G,
        "return torch.index_select(x, 0, i)",
        "with torch.cuda.device(x.device):\n    y = gems.index_select(x, 0, i.cuda())\nreturn y",
        "[torch.randn(12, 20), torch.randint(0, 12, (7,))]",
        "x, i",
        gems,
    )
    add(
        "gems_topk",
        G,
        "return torch.topk(x, 4, -1).values",
        "with torch.cuda.device(x.device):\n    y = gems.topk(x, 4, -1)[0]\nreturn y",
        "[torch.randn(6, 40)]",
        imports=gems,
    )
    add(
        "gems_vector_norm",
        G,
        "return torch.linalg.vector_norm(x, 2, [1])",
        "with torch.cuda.device(x.device):\n    y = gems.vector_norm(x, 2, [1])\nreturn y",
        "[torch.randn(6, 40)]",
        imports=gems,
    )
    return k


def write_pair(root: Path, name: str, pair: dict) -> tuple[Path, Path]:
    wl = root / f"{name}_workload.py"
    wl.write_text(
        f"{HEAD}\n\n{pair['model']}\n\ndef get_inputs():\n    torch.manual_seed(0)\n    return {pair['inputs']}\n\n\n"
        f"def get_init_inputs():\n    return {pair['init']}\n\n\n{pair['extra']}"
    )
    prog = root / f"{name}_program.py"
    prog.write_text(f"{HEAD}{pair['new']}")
    return wl, prog


def run(names: list[str], seeds: int) -> list[dict]:
    from klineage.check import check
    from klineage.config import Settings
    from klineage.program import load_program
    from klineage.sandbox import Sandbox
    from klineage.workload import load_workload

    chosen = kernels()
    rows = []
    with tempfile.TemporaryDirectory(prefix="klineage-real-") as tmp, Sandbox(warm=False) as sandbox:
        root = Path(tmp)
        settings = Settings(data_dir=root / "data", use_cache=False, seeds=seeds)
        for name in names:
            package, pair = chosen[name]
            wl, prog = write_pair(root, name, pair)
            started = time.perf_counter()
            try:
                report = check(load_workload(wl), load_program(prog), settings, "cpu", ("correctness",), sandbox)
                verdict = report.verdict("correctness")
                row = {
                    "kernel": name,
                    "package": package,
                    "status": verdict.status,
                    "code": verdict.code,
                    "reason": verdict.reason[:160],
                    "cuda_mapped": verdict.evidence.get("cuda_mapped", []),
                }
            except Exception as e:  # a benchmark row, not a crash of the whole table
                row = {"kernel": name, "package": package, "status": "error", "code": type(e).__name__}
                row.update(reason=str(e)[:160], cuda_mapped=[])
            row["seconds"] = round(time.perf_counter() - started, 1)
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    mapped = ", ".join(row["cuda_mapped"]) or "-"
    why = row["reason"].replace("|", "/").replace("\n", " ") if row["status"] != "pass" else ""
    cells = [row["kernel"], row["package"], row["status"], row["code"] or "-", row["seconds"], mapped, why]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    parser.add_argument("--seeds", type=int, default=2, help="fresh seeds per check (Settings.seeds)")
    parser.add_argument("--json", default="", help="write the rows here as JSON")
    args = parser.parse_args()
    import klineage
    from klineage.config import versions

    names = [n for n in args.only.split(",") if n] or list(kernels())
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(
        "device: cpu (Triton interpreter);", "date:", datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    )
    pkgs = {d: _version(d) for d in ("liger_kernel", "flag_gems", "fla-core")}
    print("versions:", json.dumps({**versions(), **pkgs}), "klineage from", Path(klineage.__file__).parent)
    print("\n| kernel | package | status | code | seconds | cuda_mapped | why |\n|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    rows = run(names, args.seeds)
    passed = sum(r["status"] == "pass" for r in rows)
    print(f"\nsummary: {passed} of {len(rows)} pass on the CPU, {time.perf_counter() - started:.0f} s in all")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
