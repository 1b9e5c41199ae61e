"""Launch-configuration search space: which launch parameters are tunable, and rewriting them consistently."""

from klineage.launch_config import elements_per_program, neighbours, tunables, with_values
from tests.conftest import EXAMPLES, FIXTURES


def test_tunables_of_the_naive_matmul_follow_the_host_names():
    found = {t.key: t for t in tunables((EXAMPLES / "matmul" / "naive.py").read_text())}
    assert {"BLOCK_M", "BLOCK_N", "BLOCK_K", "matmul_kernel.num_warps", "matmul_kernel.num_stages"} == set(found)
    assert found["BLOCK_M"].bound == "assigned" and found["BLOCK_M"].value == 32
    assert found["matmul_kernel.num_stages"].bound == "literal" and found["matmul_kernel.num_stages"].value == 1


def test_with_values_splits_a_chained_assignment_and_keeps_the_grid_consistent():
    source = (EXAMPLES / "matmul" / "naive.py").read_text()
    new = with_values(source, {"BLOCK_M": 128, "matmul_kernel.num_warps": 8})
    assert "BLOCK_M = 128\n" in new and "BLOCK_N = 32\n" in new and "BLOCK_K = 32\n" in new
    assert "num_warps=8" in new and "num_warps=4" not in new
    assert "triton.cdiv(M, BLOCK_M)" in new  # the grid reads the same name, so it follows the tile
    compile(new, "new", "exec")


def test_literal_tile_at_the_launch_is_tunable():
    source = (FIXTURES / "optimize" / "scale_naive.py").read_text()
    (t,) = tunables(source)
    assert t.key == "scale_kernel.BLOCK" and t.value == 128 and t.bound == "literal"
    assert "BLOCK=256" in with_values(source, {t.key: 256})


def test_neighbours_stay_in_bounds():
    source = (EXAMPLES / "matmul" / "naive.py").read_text()
    by_key = {t.key: t for t in tunables(source)}
    assert neighbours(by_key["BLOCK_M"]) == [64, 16]
    assert neighbours(by_key["matmul_kernel.num_stages"]) == [2]  # never below 1
    assert neighbours(by_key["matmul_kernel.num_warps"]) == [8, 2]


def test_unknown_key_is_an_error():
    import pytest

    with pytest.raises(KeyError):
        with_values((EXAMPLES / "softmax" / "naive.py").read_text(), {"BLOCK": 64})  # computed, not a literal


def test_a_tuple_assignment_binds_each_name():
    source = "def forward(x):\n    CHUNK, BLOCK = 512, 128\n    k[(1,)](x, CHUNK=CHUNK, BLOCK=BLOCK)\n"
    (t,) = tunables(source)  # CHUNK is not a tile name
    assert t.key == "BLOCK" and t.value == 128
    assert "CHUNK, BLOCK = 512, 256" in with_values(source, {"BLOCK": 256})


def test_a_name_an_augmented_assignment_rebinds_is_not_a_literal():
    """`BLOCK = 128; BLOCK *= 2` launches with 256: the 128 is not the launch's value, so the name is not tunable
    (it was listed as 128 before launch_config and rows_per_program shared one reading of host literals)."""
    source = "def forward(x):\n    BLOCK = 128\n    BLOCK *= 2\n    k[(1,)](x, BLOCK=BLOCK)\n"
    assert tunables(source) == []
    assert [t.value for t in tunables(source.replace("    BLOCK *= 2\n", ""))] == [128]


def test_a_name_bound_again_for_another_launch_is_one_tunable_per_binding():
    """FlagGems's radix sort binds `TILE_N = 1024` for its histogram kernel and, in a nested block, `TILE_N = 2048`
    for its sweep kernel: the search had read both launches' TILE_N as 1024, and `TILE_N: 1024 -> 512` rewrote both
    bindings (H100, RESULTS.md#wild-h100-10). Each launch now reads the binding that reaches it, keyed by which
    binding it is, and a step rewrites that binding alone."""
    source = (
        "def forward(x):\n"
        "    TILE_N = 1024\n"
        "    hist[(1,)](x, TILE_N=TILE_N)\n"
        "    with ctx():\n"
        "        TILE_N = 2048\n"
        "        sweep[(1,)](x, TILE_N=TILE_N)\n"
        "\n"
        "def other(x):\n"
        "    TILE_N = 1024\n"
        "    hist[(1,)](x, TILE_N=TILE_N)\n"
    )
    found = [(t.kernel, t.function, t.key, t.value) for t in tunables(source)]
    assert found == [
        ("hist", "forward", "TILE_N#1", 1024),
        ("sweep", "forward", "TILE_N#2", 2048),
        ("hist", "other", "TILE_N", 1024),
    ]
    first = with_values(source, {"TILE_N#1": 512})
    assert first.count("TILE_N = 512") == 1 and "TILE_N = 2048" in first and first.count("TILE_N = 1024") == 1
    assert first.index("TILE_N = 512") < first.index("def other")
    assert with_values(source, {"TILE_N#2": 4096}).count("TILE_N = 1024") == 2
    # a name bound once per function: the step rewrites its own function's binding, not the other's
    assert with_values(source, {"TILE_N": 64}).index("TILE_N = 64") > source.index("def other")


def test_a_launch_inside_a_host_loop_is_repeated():
    """A launch in a loop of its host function runs once an iteration (radix sort's sweep, once per 8-bit pass):
    its tunables say so, and the launch-configuration search steps them first."""
    source = (
        "def forward(x, passes):\n"
        "    TILE_N = 1024\n"
        "    hist[(1,)](x, TILE_N=TILE_N)\n"
        "    TILE_N = 2048\n"
        "    for i in range(passes):\n"
        "        sweep[(1,)](x, TILE_N=TILE_N, num_warps=4)\n"
        "    while passes:\n"
        "        def once(y):\n"
        "            tail[(1,)](y, BLOCK=64)\n"  # in a function of its own, in no loop of it
        "        passes -= 1\n"
        "    k[(1,)](x, BLOCK=32)\n"
        "    for j in range(2):\n"
        "        k[(2,)](x, BLOCK=32)\n"  # the same literal key launched in a loop too
    )
    found = {t.key: t.repeated for t in tunables(source)}
    assert found == {
        "TILE_N#1": False,
        "TILE_N#2": True,
        "sweep.num_warps": True,
        "tail.BLOCK": False,
        "k.BLOCK": True,
    }


def test_a_binding_that_does_not_reach_the_launch_on_every_path_is_not_tunable():
    """The literal is the launch's value only where the last binding before it is in a block around it and no
    other binding of the name sits in a loop around it."""
    branch = "def f(x):\n    BLOCK = 64\n    if x:\n        BLOCK = 128\n    k[(1,)](x, BLOCK=BLOCK)\n"
    assert tunables(branch) == []
    loop = "def f(x):\n    BLOCK = 64\n    for i in x:\n        k[(1,)](x, BLOCK=BLOCK)\n        BLOCK = 128\n"
    assert tunables(loop) == []
    target = "def f(x):\n    for BLOCK in (64, 128):\n        k[(1,)](x, BLOCK=BLOCK)\n"
    assert tunables(target) == []
    after = "def f(x):\n    BLOCK = 64\n    k[(1,)](x, BLOCK=BLOCK)\n    BLOCK = 128\n    k[(2,)](x, BLOCK=BLOCK)\n"
    assert [(t.key, t.value) for t in tunables(after)] == [("BLOCK#1", 64), ("BLOCK#2", 128)]


def test_a_loop_bound_constexpr_is_work_per_program_when_asked():
    """The atomic row sum's CHUNK bounds its kernel's loop and divides its grid: 512 ran at 0.59 of the roofline,
    8192 at 0.84 (H200). It is tunable as work per program, listed only with work=True, with wider bounds."""
    source = (EXAMPLES.parent / "suites" / "heldout" / "atomic_rowsum" / "naive.py").read_text()
    assert [t.key for t in tunables(source)] == ["BLOCK"]
    chunk, block = tunables(source, work=True)
    assert (chunk.key, chunk.value, chunk.work, chunk.step, block.work) == ("CHUNK", 512, True, "BLOCK", False)
    new = with_values(source, {"CHUNK": 1024})
    assert "CHUNK, BLOCK = 1024, 128" in new and "triton.cdiv(n_cols, CHUNK)" in new
    big = with_values(source, {"CHUNK": 32768})
    assert neighbours(tunables(big, work=True)[0]) == [65536, 16384]
    assert neighbours(tunables(with_values(source, {"CHUNK": 65536}), work=True)[0]) == [32768]  # the bound
    # a name the loop does not run up to is no work parameter; a runtime size the launch passes is no literal
    other = "def forward(x):\n    CHUNK, BLOCK = 512, 128\n    k[(1,)](x, CHUNK=CHUNK, BLOCK=BLOCK)\n"
    assert [t.key for t in tunables(other, work=True)] == ["BLOCK"]


def test_elements_per_program_from_the_launch_tiles_or_nothing():
    from klineage.launch_config import elements_per_program

    heldout, examples = EXAMPLES.parent / "suites" / "heldout", EXAMPLES
    assert elements_per_program((heldout / "bias_gelu" / "naive.py").read_text(), "bias_gelu_kernel") == 128
    assert elements_per_program((examples / "matmul" / "naive.py").read_text(), "matmul_kernel") == 32**3
    # a row kernel looping over its columns BLOCK at a time (the same arange in three passes): still BLOCK
    assert elements_per_program((heldout / "layernorm" / "naive.py").read_text(), "layernorm_kernel") == 128
    # computed at run time (next_power_of_2): unknown here (a launch knows it: launched_elements)
    assert elements_per_program((examples / "softmax" / "naive.py").read_text(), "softmax_kernel") is None
    # one name spanning rows and columns of a 2-D tile: counted once per dimension, never undercounted
    transpose = (heldout / "transpose_copy" / "naive.py").read_text()
    assert elements_per_program(transpose, "transpose_kernel") == 32**2
    assert elements_per_program(transpose.replace("BLOCK = 32", "BLOCK = 64"), "transpose_kernel") == 64**2


def test_launched_elements_read_the_tile_a_launch_asked_for():
    from klineage.launch_config import launched_elements

    softmax = (EXAMPLES / "softmax" / "naive.py").read_text()
    row = {"kernel": "softmax_kernel", "constexprs": {"BLOCK": 8192}, "num_warps": None, "programs": 8192}
    assert launched_elements(softmax, "softmax_kernel", [row]) == 8192
    assert launched_elements(softmax, "softmax_kernel", [row, {**row, "constexprs": {"BLOCK": 4096}}]) is None
    assert launched_elements(softmax, "softmax_kernel", [{**row, "kernel": "other"}]) is None
    assert launched_elements(softmax, "softmax_kernel", None) is None
    transpose = (EXAMPLES.parent / "suites" / "heldout" / "transpose_copy" / "naive.py").read_text()
    assert (
        launched_elements(
            transpose, "transpose_kernel", [{**row, "kernel": "transpose_kernel", "constexprs": {"BLOCK": 32}}]
        )
        == 32**2
    )


# bitsandbytes's 8-bit blockwise dequantization (kernels_8bit_quant, 0.50.2) as it launches: its tile passed by
# position, under a name TILE_NAME does not match, a tile by its role (the extent of tl.arange)
POSITIONAL = """
import torch
import triton
import triton.language as tl


@triton.jit
def dequant_8bit_kernel(a_ptr, out_ptr, code_ptr, absmax_ptr, n, QUANT_BLOCK: tl.constexpr, SPLIT_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * SPLIT_SIZE + tl.arange(0, SPLIT_SIZE)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask)
    scaled = tl.load(code_ptr + a, mask) * tl.load(absmax_ptr + offsets // QUANT_BLOCK, mask)
    tl.store(out_ptr + offsets, scaled, mask)


def dequant_8bit_blockwise(a, absmax, quant_state_code, quant_blocksize, out):
    n = a.numel()
    SPLIT_SIZE = 256
    QUANT_BLOCK = 64
    grid = (triton.cdiv(n, SPLIT_SIZE),)
    dequant_8bit_kernel[grid](a, out, quant_state_code, absmax, n, QUANT_BLOCK, SPLIT_SIZE)
    return out
"""


def test_a_positional_tile_by_role_is_tunable_and_its_binding_rewritten():
    (t,) = tunables(POSITIONAL)  # QUANT_BLOCK is a positional constexpr, but no tile by name or role
    assert (t.kernel, t.keyword, t.name, t.value, t.bound) == (
        "dequant_8bit_kernel",
        "SPLIT_SIZE",
        "SPLIT_SIZE",
        256,
        "assigned",
    )
    new = with_values(POSITIONAL, {"SPLIT_SIZE": 512})
    assert "SPLIT_SIZE = 512\n" in new and "QUANT_BLOCK = 64\n" in new
    assert "grid = (triton.cdiv(n, SPLIT_SIZE),)" in new  # the grid reads the same name, so it follows the tile
    assert "absmax, n, QUANT_BLOCK, SPLIT_SIZE)" in new
    compile(new, "new", "exec")


def test_a_positional_literal_tile_is_rewritten_at_its_position():
    source = POSITIONAL.replace("QUANT_BLOCK, SPLIT_SIZE)", "64, 256, num_warps=4)")
    found = {t.key: t for t in tunables(source)}
    assert set(found) == {"dequant_8bit_kernel.SPLIT_SIZE", "dequant_8bit_kernel.num_warps"}
    assert found["dequant_8bit_kernel.SPLIT_SIZE"].bound == "literal"
    new = with_values(source, {"dequant_8bit_kernel.SPLIT_SIZE": 128})
    assert "absmax, n, 64, 128, num_warps=4)" in new


def test_a_positional_launch_of_a_kernel_defined_elsewhere_adds_nothing():
    source = POSITIONAL.replace("def dequant_8bit_kernel(", "def other_kernel(")
    assert tunables(source) == []
    # nor past a *args, whose positions are unknown
    assert tunables(POSITIONAL.replace("(a, out, quant_state_code, absmax, n,", "(*args,")) == []


def test_elements_per_program_reads_a_positional_tile_by_role():
    assert elements_per_program(POSITIONAL, "dequant_8bit_kernel") == 256


HANDED = """
import triton
from m import int_matmul_kernel


def forward(a, b, c):
    return int_matmul_kernel(
        a, b, c, triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "GROUP_M": 8, "EVEN": True}, num_stages=1, num_warps=1)
    )


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64}, num_warps=4)], key=[])
@triton.jit
def k(x, BLOCK_M: tl.constexpr):
    pass
"""


def test_a_config_literal_handed_to_a_host_function_is_tunable_where_written():
    """torchao's int8 matmul wrapper launches with `**config.kwargs` from a `triton.Config` argument: the literal at
    the call is the only place its tiles can change. GROUP_M (no tile name), a non-integer and an autotuner's
    configs are not tunables."""
    found = {t.key: (t.value, t.bound, t.function) for t in tunables(HANDED)}
    assert found == {
        "int_matmul_kernel.BLOCK_M": (32, "config", "forward"),
        "int_matmul_kernel.BLOCK_N": (32, "config", "forward"),
        "int_matmul_kernel.num_stages": (1, "config", "forward"),
        "int_matmul_kernel.num_warps": (1, "config", "forward"),
    }
    new = with_values(HANDED, {"int_matmul_kernel.BLOCK_N": 128, "int_matmul_kernel.num_warps": 8})
    assert '{"BLOCK_M": 32, "BLOCK_N": 128, "GROUP_M": 8, "EVEN": True}, num_stages=1, num_warps=8)' in new
    assert 'triton.Config({"BLOCK_M": 64}, num_warps=4)' in new  # the autotuner's list untouched
    assert {t.key: t.value for t in tunables(new)}["int_matmul_kernel.BLOCK_N"] == 128


def test_a_config_appended_to_a_list_is_not_a_handed_config():
    source = (
        "import triton\n\n\ndef configs():\n    out = []\n"
        "    out.append(triton.Config({'BLOCK_M': 32}, num_warps=2))\n    return out\n"
    )
    assert tunables(source) == []


def test_tile_dims_reads_every_tile_name_and_no_knob():
    from klineage.proposers.params import tile_dims

    assert tile_dims({"BLOCK_M": 64, "num_warps": 4, "GROUP_M": 8}) == {"BLOCK_M"}
    assert tile_dims({"TILE_N": 64, "BM": 128, "BLOCK_SIZE_K": 32, "num_stages": 3}) == {"TILE_N", "BM", "BLOCK_SIZE_K"}
    assert tile_dims({"num_warps": 8, "num_stages": 2}) == frozenset()
