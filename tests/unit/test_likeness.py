"""Likeness (klineage.likeness): how alike a skill's expert and a target kernel are, factor by factor; what a side
does not know counts as unknown, never as alike; old skill files, without the fields, still load."""

import json

import pytest

from klineage.likeness import (
    NO_LIKE_KERNEL,
    UNLIKE,
    _tile_rank,
    context_of,
    likeness,
    operator_class,
    skill_context,
    tile_rank,
)
from klineage.program import load_program
from klineage.skills import load_skill
from tests.conftest import EXAMPLES
from tests.optimize.skillmaker import make_skill

# construct flags as klineage.features writes them (every flag present), for four kinds of kernel
FLAGS = ("dot", "reduction", "exp", "atomic", "loop", "mask", "where", "fp32_cast", "rsqrt", "two_d")


def feats(*on: str, bound: float | None = None, dtype: str | None = None) -> dict[str, float]:
    out = {k: float(k in on) for k in FLAGS}
    if bound is not None:
        out["compute_bound"] = bound
    if dtype is not None:
        out.update({f"dtype_{d}": float(d == dtype) for d in ("float32", "float16", "bfloat16")})
    return out


RMSNORM = feats("reduction", "mask", "fp32_cast", "rsqrt", bound=0.0, dtype="bfloat16")
SOFTMAX = feats("reduction", "exp", "mask", "where", "fp32_cast", bound=0.0, dtype="bfloat16")
CROSS_ENTROPY = feats("reduction", "exp", "loop", "mask", "where", "fp32_cast", bound=0.0, dtype="bfloat16")
MATMUL = feats("dot", "loop", "mask", "two_d", bound=1.0, dtype="bfloat16")


def test_the_same_operator_is_more_alike_than_the_same_class_than_another_class():
    target = context_of(RMSNORM, 1, "rmsnorm")
    same_op = likeness(context_of(RMSNORM, 1, "rmsnorm"), target)
    same_class = likeness(context_of(SOFTMAX, 1, "softmax"), target)
    other_class = likeness(context_of(MATMUL, 3, "matmul"), target)
    assert same_op.value == 1.0
    assert 1.0 > same_class.value > other_class.value
    assert same_op.like and same_class.like and not other_class.like
    assert other_class.factors["operator"] == UNLIKE["operator"]
    # another class and regime, tile rank: each factor below 1, the product small
    assert other_class.value < 0.1 and all(v < 1 for k, v in other_class.factors.items() if k != "dtype")


def test_fields_the_source_lacks_count_as_unknown_not_as_alike():
    target = context_of(MATMUL, 3, "matmul")
    alike = likeness(context_of(MATMUL, 3, "matmul"), target)
    no_rank = likeness(context_of(MATMUL, None, "matmul"), target)
    no_features = likeness(context_of(None, None, "matmul"), target)
    assert alike.value == 1.0
    assert no_rank.factors["tile"] == pytest.approx((1 + UNLIKE["tile"]) / 2) and no_rank.value < alike.value
    assert all(v == pytest.approx((1 + UNLIKE[k]) / 2) for k, v in no_features.factors.items())
    assert no_features.value == pytest.approx(0.625 * 0.75**4)  # the module's "a fifth" of the log-gain
    assert not no_features.like  # an unknown class is no like kernel
    # halfway: above a known unlike side, below a known alike one
    unlike_rank = likeness(context_of(MATMUL, 1, "matmul"), target)
    assert unlike_rank.value < no_rank.value < alike.value


def test_the_dtype_factor_tells_the_element_size_from_the_type():
    target = context_of(feats("mask", dtype="float16"), 1)
    bf16 = likeness(context_of(feats("mask", dtype="bfloat16"), 1), target).factors["dtype"]
    fp32 = likeness(context_of(feats("mask", dtype="float32"), 1), target).factors["dtype"]
    assert 1.0 > bf16 > fp32 == UNLIKE["dtype"]


def test_operator_classes_from_the_construct_flags():
    assert operator_class(MATMUL) == "matmul"
    assert operator_class(feats("dot", "exp", "reduction", "loop")) == "attention"
    assert operator_class(CROSS_ENTROPY) == operator_class(RMSNORM) == "reduction"
    assert operator_class(feats("atomic", "mask")) == "reduction"
    assert operator_class(feats("mask", "fp32_cast")) == "elementwise"
    assert operator_class({"compute_bound": 1.0}) is None  # no construct flag at all: not known
    assert operator_class({"dot": 1.0}) == "matmul"  # a flag left out of a vector that has others is not set


def test_tile_rank_counts_the_tile_sizes_one_kernel_takes():
    assert tile_rank(load_program(EXAMPLES / "matmul" / "naive.py")) == 3  # BLOCK_M, BLOCK_N, BLOCK_K
    assert tile_rank(load_program(EXAMPLES / "attention" / "naive.py")) == 2
    assert tile_rank(load_program(EXAMPLES / "rmsnorm" / "naive.py")) == 1


def test_tile_rank_counts_a_tile_by_its_role():
    """bitsandbytes's 8-bit dequantization spans `tl.arange(0, SPLIT_SIZE)`: a row kernel (rank 1), not one
    without tiles; a constexpr that is no extent (a block count) is not a tile."""
    source = (
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def k(a, out, n, QUANT_BLOCK: tl.constexpr, SPLIT_SIZE: tl.constexpr):\n"
        "    offs = tl.program_id(0) * SPLIT_SIZE + tl.arange(0, SPLIT_SIZE)\n"
        "    tl.store(out + offs, tl.load(a + offs, mask=offs < n) * QUANT_BLOCK, mask=offs < n)\n"
    )
    assert _tile_rank(source) == 1
    assert _tile_rank(source.replace("tl.arange(0, SPLIT_SIZE)", "tl.arange(0, 256)")) == 0


def test_the_phrase_names_the_expert_and_both_classes_only_across_operators():
    ce = context_of(CROSS_ENTROPY, 1, "cross_entropy")
    across = likeness(ce, context_of(MATMUL, 3, "matmul"))
    text = across.phrase("liger")
    assert text.startswith("from liger (reduction) to matmul, likeness 0.0")
    assert text == f"from liger (reduction) to matmul, likeness {across.value:.2f}"
    same = likeness(context_of(MATMUL, 3, "matmul"), context_of(MATMUL, 3, "matmul"))
    assert same.phrase("expert") == "likeness 1.00" and not same.another_operator
    d = across.as_dict()
    assert d["another_operator"] and not d["like_kernel"] and d["source"]["operator"] == "reduction"
    assert set(d["factors"]) == {"operator", "constructs", "bound", "dtype", "tile"}
    assert NO_LIKE_KERNEL == "no evidence from a like kernel"


def test_old_skill_files_without_the_context_still_load(tmp_path):
    """Schema 1 is unchanged: `tile_rank` is an optional provenance entry, and a file without it (or without
    `features`) loads, its context unknown."""
    old = make_skill("launch_knobs", {"num_warps": "8"}, (), 1.5)
    new = make_skill("launch_knobs", {"num_warps": "8"}, (), 1.5, features=MATMUL, tile_rank=3)
    for skill in (old, new):
        path = tmp_path / f"{skill.id}.json"
        path.write_text(json.dumps(skill.as_dict()))
        loaded = load_skill(path)
        assert loaded == skill
    unknown = skill_context(old.provenance)
    assert (unknown.operator, unknown.bound, unknown.dtype, unknown.tile_rank) == (None, None, None, None)
    known = skill_context(new.provenance)
    assert (known.operator, known.bound, known.tile_rank, known.name) == ("matmul", "compute", 3, "test")
