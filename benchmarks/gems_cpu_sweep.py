"""FlagGems ops outside the wild suite, started on the CPU as a wild start is (the compile and correctness gates,
the program its own reference, CUDA mapped to the CPU): the interpreter and host gaps that real kernels hit, found by
running many of them (issue 31). Two groups, chosen by a rule, not by whether they pass:

- `device-reads`: every op module of FlagGems 5.0.2 whose wrapper reads where its tensors live (`is_cuda`, `is_cpu`,
  `device.type`) and is not in the wild suite, less those that need a GPU-only dtype or a second library (16);
- `ops`: its plain elementwise, comparison and reduction ops and a spread of shape, scatter, pooling and selection
  ops not in the wild suite nor the first group (80), each on the bench size of a wild entry.

    GEMS_VENDOR=nvidia KLINEAGE_SEEDS=2 KLINEAGE_HOME=$(mktemp -d) PYTHONPATH=SITE:src:. \\
        python benchmarks/gems_cpu_sweep.py --group device-reads|ops|all --out rows.jsonl [--shard i/n]

One JSON line per op (benchmarks/wild_cpu_starts.py's row), then a table. Run it against two trees (PYTHONPATH) to
compare them: RESULTS.md#device-reads. A report, not a test."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MN = {"M": 1024, "N": 1024}
X = "[torch.randn(M, N)]"
XY = "[torch.randn(M, N), torch.randn(M, N)]"
UP = "[2 * x.shape[2]]"
# (name, FlagGems module, function, args, call, PyTorch's op, sizes, inputs)
DEVICE_READS = (
    ("safe_softmax", "_safe_softmax", "_safe_softmax", "x", "_safe_softmax(x, -1)", "torch.softmax(x, -1)", MN, X),
    ("arcsinh", "arcsinh", "arcsinh", "x", "arcsinh(x)", "torch.arcsinh(x)", MN, X),
    ("minimum", "minimum", "minimum", "x, y", "minimum(x, y)", "torch.minimum(x, y)", MN, XY),
    ("maximum", "maximum", "maximum", "x, y", "maximum(x, y)", "torch.maximum(x, y)", MN, XY),
    (
        "one_hot",
        "one_hot",
        "one_hot",
        "x",
        "one_hot(x, 64)",
        "F.one_hot(x, 64)",
        {"N": 65536},
        "[torch.randint(0, 64, (N,))]",
    ),
    ("prelu", "prelu", "prelu", "x, w", "prelu(x, w)", "F.prelu(x, w)", MN, "[torch.randn(M, N), torch.rand(N)]"),
    (
        "reflection_pad2d",
        "reflection_pad2d",
        "reflection_pad2d",
        "x",
        "reflection_pad2d(x, [3, 3, 3, 3])",
        "F.pad(x, [3, 3, 3, 3], mode='reflect')",
        {"H": 256, "W": 256},
        "[torch.randn(4, 8, H, W)]",
    ),
    (
        "soft_margin_loss",
        "soft_margin_loss",
        "soft_margin_loss",
        "x, y",
        "soft_margin_loss(x, y)",
        "F.soft_margin_loss(x, y)",
        MN,
        "[torch.randn(M, N), torch.randn(M, N).sign()]",
    ),
    ("special_i0e", "special_i0e", "special_i0e", "x", "special_i0e(x)", "torch.special.i0e(x)", MN, X),
    ("special_i1", "special_i1", "special_i1", "x", "special_i1(x)", "torch.special.i1(x)", MN, X),
    ("i0", "i0", "i0", "x", "i0(x)", "torch.i0(x)", MN, X),
    ("t_copy", "t_copy", "t_copy", "x", "t_copy(x)", "x.t().contiguous()", MN, X),
    (
        "upsample_bicubic2d",
        "upsample_bicubic2d",
        "upsample_bicubic2d",
        "x",
        "upsample_bicubic2d(x, [2 * x.shape[2], 2 * x.shape[3]])",
        "F.interpolate(x, scale_factor=2, mode='bicubic')",
        {"H": 128, "W": 128},
        "[torch.randn(2, 4, H, W)]",
    ),
    (
        "upsample_linear1d",
        "upsample_linear1d",
        "upsample_linear1d",
        "x",
        f"upsample_linear1d(x, {UP}, False)",
        "F.interpolate(x, scale_factor=2, mode='linear')",
        {"W": 4096},
        "[torch.randn(4, 16, W)]",
    ),
    (
        "upsample_nearest1d",
        "upsample_nearest1d",
        "upsample_nearest1d",
        "x",
        f"upsample_nearest1d(x, {UP})",
        "F.interpolate(x, scale_factor=2)",
        {"W": 4096},
        "[torch.randn(4, 16, W)]",
    ),
    (
        "upsample_nearest3d",
        "upsample_nearest3d",
        "upsample_nearest3d",
        "x",
        "upsample_nearest3d(x, [2 * x.shape[2], 2 * x.shape[3], 2 * x.shape[4]])",
        "F.interpolate(x, scale_factor=2)",
        {"D": 16, "H": 32, "W": 32},
        "[torch.randn(2, 4, D, H, W)]",
    ),
)


XP = "[torch.rand(M, N) + 0.1]"
XYZ = "[torch.randn(M, N), torch.randn(M, N), torch.rand(M, N) + 0.5]"
UNARY = "abs atan ceil cos erf exp exp2 expm1 isfinite isinf isnan logical_not neg sigmoid signbit sin square tan tanh"
UNARY_F = "gelu elu celu selu softplus relu silu"  # PyTorch's op is F.<name>
BINARY = "add sub mul atan2 copysign ge gt le lt ne fmin hypot logaddexp logical_and isclose"


def _ops() -> tuple:
    rows = [(n, n, n, "x", f"{n}(x)", f"torch.{n}(x)", MN, X) for n in UNARY.split()]
    rows += [(n, n, n, "x", f"{n}(x)", f"F.{n}(x)", MN, X) for n in UNARY_F.split()]
    rows += [(n, n, n, "x", f"{n}(x)", f"torch.{n}(x)", MN, XP) for n in ("log", "reciprocal", "rsqrt", "sqrt")]
    rows += [(n, n, n, "x, y", f"{n}(x, y)", f"torch.{n}(x, y)", MN, XY) for n in BINARY.split()]
    rows += [(n, n, n, "x", f"{n}(x)", f"torch.{n}(x)", MN, X) for n in ("sum", "mean", "max", "min", "angle")]
    rows += [
        ("log_sigmoid", "log_sigmoid", "log_sigmoid", "x", "log_sigmoid(x)", "F.logsigmoid(x)", MN, X),
        ("nan_to_num", "nan_to_num", "nan_to_num", "x", "nan_to_num(x)", "torch.nan_to_num(x)", MN, X),
        (
            "div",
            "div",
            "true_divide",
            "x, y",
            "true_divide(x, y)",
            "x / y",
            MN,
            "[torch.randn(M, N), torch.rand(M, N) + 0.5]",
        ),
        (
            "pow",
            "pow",
            "pow_tensor_tensor",
            "x, y",
            "pow_tensor_tensor(x, y)",
            "torch.pow(x, y)",
            MN,
            "[torch.rand(M, N) + 0.1, torch.randn(M, N)]",
        ),
        ("prod", "prod", "prod", "x", "prod(x)", "torch.prod(x)", MN, "[torch.rand(M, N) * 0.02 + 0.99]"),
        ("all", "all", "all", "x", "all(x)", "torch.all(x)", MN, "[torch.randn(M, N) > -3]"),
        ("any", "any", "any", "x", "any(x)", "torch.any(x)", MN, "[torch.randn(M, N) > 3]"),
        ("var_mean", "var_mean", "var_mean", "x", "var_mean(x, [1])", "torch.var_mean(x, [1])", MN, X),
        (
            "where",
            "where",
            "where_self",
            "c, x, y",
            "where_self(c, x, y)",
            "torch.where(c, x, y)",
            MN,
            "[torch.randn(M, N) > 0, torch.randn(M, N), torch.randn(M, N)]",
        ),
        ("lerp", "lerp", "lerp_scalar", "x, y", "lerp_scalar(x, y, 0.3)", "torch.lerp(x, y, 0.3)", MN, XY),
        ("clamp", "clamp", "clamp", "x", "clamp(x, -0.5, 0.5)", "torch.clamp(x, -0.5, 0.5)", MN, X),
        (
            "addcmul",
            "addcmul",
            "addcmul",
            "x, y, z",
            "addcmul(x, y, z, value=0.5)",
            "torch.addcmul(x, y, z, value=0.5)",
            MN,
            XYZ,
        ),
        (
            "addcdiv",
            "addcdiv",
            "addcdiv",
            "x, y, z",
            "addcdiv(x, y, z, value=0.5)",
            "torch.addcdiv(x, y, z, value=0.5)",
            MN,
            XYZ,
        ),
        ("threshold", "threshold", "threshold", "x", "threshold(x, 0.1, 0.0)", "F.threshold(x, 0.1, 0.0)", MN, X),
        ("softshrink", "softshrink", "softshrink", "x", "softshrink(x, 0.5)", "F.softshrink(x, 0.5)", MN, X),
        ("nonzero", "nonzero", "nonzero", "x", "nonzero(x)", "torch.nonzero(x)", MN, "[torch.randn(M, N) > 1]"),
        (
            "masked_select",
            "masked_select",
            "masked_select",
            "x, m",
            "masked_select(x, m)",
            "torch.masked_select(x, m)",
            MN,
            "[torch.randn(M, N), torch.randn(M, N) > 0]",
        ),
        (
            "repeat_interleave",
            "repeat_interleave",
            "repeat_interleave_self_int",
            "x",
            "repeat_interleave_self_int(x, 2, 0)",
            "torch.repeat_interleave(x, 2, 0)",
            MN,
            X,
        ),
        ("diag_embed", "diag_embed", "diag_embed", "x", "diag_embed(x)", "torch.diag_embed(x)", {"M": 64, "N": 256}, X),
        ("hstack", "hstack", "hstack", "x, y", "hstack([x, y])", "torch.hstack([x, y])", MN, XY),
        ("vstack", "vstack", "vstack", "x, y", "vstack([x, y])", "torch.vstack([x, y])", MN, XY),
        (
            "pixel_unshuffle",
            "pixel_unshuffle",
            "pixel_unshuffle",
            "x",
            "pixel_unshuffle(x, 2)",
            "F.pixel_unshuffle(x, 2)",
            {"H": 256, "W": 256},
            "[torch.randn(2, 8, H, W)]",
        ),
        (
            "replication_pad1d",
            "replication_pad1d",
            "replication_pad1d",
            "x",
            "replication_pad1d(x, [3, 5])",
            "F.pad(x, [3, 5], mode='replicate')",
            {"W": 4096},
            "[torch.randn(4, 16, W)]",
        ),
        (
            "reflection_pad1d",
            "reflection_pad1d",
            "reflection_pad1d",
            "x",
            "reflection_pad1d(x, [3, 5])",
            "F.pad(x, [3, 5], mode='reflect')",
            {"W": 4096},
            "[torch.randn(4, 16, W)]",
        ),
        (
            "select_scatter",
            "select_scatter",
            "select_scatter",
            "x, s",
            "select_scatter(x, s, 0, 3)",
            "torch.select_scatter(x, s, 0, 3)",
            MN,
            "[torch.randn(M, N), torch.randn(N)]",
        ),
        (
            "slice_scatter",
            "slice_scatter",
            "slice_scatter",
            "x, s",
            "slice_scatter(x, s, 1, 0, x.shape[1] // 2)",
            "torch.slice_scatter(x, s, 1, 0, x.shape[1] // 2)",
            MN,
            "[torch.randn(M, N), torch.randn(M, N // 2)]",
        ),
        (
            "max_pool2d",
            "max_pool2d_with_indices",
            "max_pool2d_with_indices",
            "x",
            "max_pool2d_with_indices(x, [2, 2])[0]",
            "F.max_pool2d(x, 2)",
            {"H": 128, "W": 128},
            "[torch.randn(2, 8, H, W)]",
        ),
        (
            "polar",
            "polar",
            "polar",
            "a, t",
            "torch.view_as_real(polar(a, t))",
            "torch.view_as_real(torch.polar(a, t))",
            MN,
            "[torch.rand(M, N), torch.randn(M, N)]",
        ),
        ("logit", "logit", "logit", "x", "logit(x, 1e-6)", "torch.logit(x, 1e-6)", MN, "[torch.rand(M, N)]"),
        (
            "unique",
            "unique",
            "_unique2",
            "x",
            "_unique2(x, True)[0]",
            "torch.unique(x, sorted=True)",
            {"N": 65536},
            "[torch.randint(0, 1000, (N,))]",
        ),
    ]
    return tuple(rows)


GROUPS = {"device-reads": DEVICE_READS, "ops": _ops()}


def main() -> None:
    from wild_cpu_starts import run_starts

    from klineage.bench.suites import wild_instances
    from klineage.config import Settings, device_name, versions
    from klineage.suites.wild import _gems

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--group", choices=(*GROUPS, "all"), default="all")
    parser.add_argument("--shard", default="0/1", help="I/N: every N-th op from the I-th")
    args = parser.parse_args()
    print(f"$ python {' '.join(sys.argv)}", flush=True)
    print(f"{device_name('cpu')}, {versions()}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC", flush=True)
    settings = Settings.from_env()
    groups = GROUPS if args.group == "all" else {args.group: GROUPS[args.group]}
    kernels = tuple(_gems(f"sweep_{name}", *rest) for ops in groups.values() for name, *rest in ops)
    index, count = (int(n) for n in args.shard.split("/"))
    instances, left = wild_instances(settings, kernels[index::count])
    rows = run_starts(instances, settings, args.out)
    print("\n| op | start | gate | code | why | seconds |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        why = r.get("why", "")[:90].replace("|", "/")
        print(
            f"| {r['instance']} | {r.get('start', 'no load')} | {r.get('gate', '')} | {r.get('code', '')} | {why} | "
            f"{r['seconds']} |"
        )
    print(f"\n{sum(r.get('start') == 'pass' for r in rows)} of {len(rows)} pass; not offered: {left or 'none'}")


if __name__ == "__main__":
    main()
