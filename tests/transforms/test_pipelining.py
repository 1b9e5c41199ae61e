import textwrap
from pathlib import Path

from klineage.transforms.pipelining import Pipelining
from tests.transforms.roundtrip import installed_source, round_trip

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "klineage" / "examples"

EXPERT = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit
    def k(x_ptr, n, NUM_SMS: tl.constexpr, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for tile in tl.range(tl.program_id(0), n, NUM_SMS, flatten=True, warp_specialize=True):
            for k in tl.range(0, n, BLOCK, num_stages=3):
                acc += tl.load(x_ptr + k + tl.arange(0, BLOCK))
        for j in tl.range(0, n, loop_unroll_factor=2, num_stages=2):
            pass


    def host(n):
        for i in range(n):
            pass
    """
)
SIMPLE_0 = EXPERT.replace(
    "tl.range(tl.program_id(0), n, NUM_SMS, flatten=True, warp_specialize=True)", "range(tl.program_id(0), n, NUM_SMS)"
)
SIMPLE_1 = EXPERT.replace("tl.range(0, n, BLOCK, num_stages=3)", "range(0, n, BLOCK)")


def test_simplify_fixture():
    t = Pipelining()
    sites = t.sites(EXPERT)
    # post-order: the inner loop is numbered first; the loop_unroll_factor loop is family 30's
    assert [s.params for s in sites] == [{"num_stages": "3"}, {"flatten": "True", "warp_specialize": "True"}]
    assert t.simplify(EXPERT, sites[0]) == SIMPLE_1
    assert t.simplify(EXPERT, sites[1]) == SIMPLE_0


def test_optimize_fixture():
    t = Pipelining()
    plain = t.optimize_sites(SIMPLE_1)
    assert len(plain) == 1 and plain[0].function == "k"  # the host loop is not a kernel loop
    assert t.optimize(SIMPLE_1, plain[0], {"num_stages": "3"}) == EXPERT
    assert "tl.range(0, n, BLOCK, num_stages=4)" in t.optimize(SIMPLE_1, plain[0], {"num_stages": "4"})


def test_round_trip_fixture():
    assert round_trip(Pipelining(), EXPERT) == 2


def test_round_trip_bundled_matmul():
    # The bundled matmul pipelines through its configs' num_stages; give its K loop a loop-level knob, then the
    # knob must come off and back exactly.
    src = (EXAMPLES / "matmul" / "tuned.py").read_text()
    t = Pipelining()
    (plain,) = t.optimize_sites(src)
    expert = t.optimize(src, plain, {"num_stages": "4"})
    assert "    for k in tl.range(0, tl.cdiv(K, BLOCK_K), num_stages=4):\n" in expert
    assert round_trip(t, expert) == 1
    assert t.simplify(expert, t.sites(expert)[0]) == src


def test_round_trip_liger_group_norm():
    src = installed_source("liger_kernel.ops.group_norm")
    t = Pipelining()
    assert t.sites(src) == []
    expert = t.optimize(src, t.optimize_sites(src)[0], {"num_stages": "2"})
    assert round_trip(t, expert) == 1


def test_no_pattern():
    t = Pipelining()
    assert t.sites("x = 1\n") == [] and t.optimize_sites("for i in range(3):\n    pass\n") == []
    assert t.sites("def broken(:\n") == []
