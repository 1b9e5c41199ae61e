import textwrap
from pathlib import Path

import pytest

from klineage.transform import matching_optimize_site
from klineage.transforms.launch_knobs import LaunchKnobs
from tests.transforms.roundtrip import installed_source, round_trip

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "klineage" / "examples"

EXPERT = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        pass


    def launch(x, n):
        k[(1,)](x, n, BLOCK=1024, num_warps=8, num_stages=2)
        k[(n,)](
            x,
            n,
            BLOCK=64,
            num_warps=nw,
        )
        k[(n,)](x, n, BLOCK=64)
    """
)

SIMPLE_0 = EXPERT.replace("BLOCK=1024, num_warps=8, num_stages=2)", "BLOCK=1024)")
SIMPLE_1 = EXPERT.replace("BLOCK=64,\n        num_warps=nw,\n", "BLOCK=64,\n")


def test_simplify_fixture():
    t = LaunchKnobs()
    sites = t.sites(EXPERT)
    assert [s.params for s in sites] == [{"num_warps": "8", "num_stages": "2"}, {"num_warps": "nw"}]
    assert t.simplify(EXPERT, sites[0]) == SIMPLE_0
    assert t.simplify(EXPERT, sites[1]) == SIMPLE_1


def test_optimize_fixture():
    t = LaunchKnobs()
    plain = t.optimize_sites(SIMPLE_1)
    assert [s.line for s in plain] == [12, 17]
    out = t.optimize(SIMPLE_1, plain[1], {"num_warps": "4"})
    assert out == SIMPLE_1.replace("k[(n,)](x, n, BLOCK=64)\n", "k[(n,)](x, n, BLOCK=64, num_warps=4)\n")


def test_kwargs_tail_kept_last():
    src = "import triton\n@triton.jit\ndef k(x):\n    pass\nk[(1,)](x, num_warps=4, **extra)\n"
    t = LaunchKnobs()
    (site,) = t.sites(src)
    simple = t.simplify(src, site)
    assert simple.endswith("k[(1,)](x, **extra)\n")
    assert t.optimize(simple, matching_optimize_site(t, simple, site), site.params) == src


def test_round_trip_fixture():
    assert round_trip(LaunchKnobs(), EXPERT) == 2


@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_round_trip_bundled(name):
    src = (EXAMPLES / name / "tuned.py").read_text()
    assert round_trip(LaunchKnobs(), src) == 1


@pytest.mark.parametrize("module", ["rms_norm", "softmax"])
def test_round_trip_liger(module):
    src = installed_source(f"liger_kernel.ops.{module}")
    assert round_trip(LaunchKnobs(), src) >= 1


def test_skips():
    t = LaunchKnobs()
    # no pattern; not a kernel launch; imported kernel; knob not trailing; autotuned kernel
    assert t.sites("x = 1\n") == [] and t.optimize_sites("x = 1\n") == []
    assert t.sites("layers[0](x, num_warps=4)\n") == []
    assert t.sites("from m import k\nk[(1,)](x, num_warps=4)\n") == []
    assert t.sites("import triton\n@triton.jit\ndef k(x, B):\n    pass\nk[(1,)](x, num_warps=4, B=2)\n") == []
    auto = "import triton\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    pass\nk[(1,)](x)\n"
    assert t.optimize_sites(auto) == []
    # a library's own autotuner (FlagGems's libtuner): its configs own the knobs just the same
    tuned = "import triton\n@libentry()\n@libtuner(configs=get(), key=['M'])\n@triton.jit\ndef k(x):\n    pass\n"
    assert t.optimize_sites(tuned + "k[(1,)](x)\n") == []
    assert t.sites(tuned + "k[(1,)](x, 1, num_warps=4)\n") == []
    assert t.optimize_sites(tuned.replace("@libtuner(configs=get(), key=['M'])\n", "")) == []  # no launch
    assert len(t.optimize_sites(tuned.replace("@libtuner(configs=get(), key=['M'])\n", "") + "k[(1,)](x)\n")) == 1
    assert t.sites("def broken(:\n") == []


def test_the_sites_of_a_program_are_found_once_and_handed_out_as_copies(monkeypatch):
    from klineage.transforms._anchored import FOUND_KEPT

    t, runs = LaunchKnobs(), []
    real = t._scoped_run
    monkeypatch.setattr(t, "_scoped_run", lambda *a: runs.append(a) or real(*a))
    src = installed_source("liger_kernel.ops.rms_norm")
    first = t.sites(src)
    first[0].params["num_warps"] = "64"
    again = t.sites(src)
    assert len(runs) == 1 and again[0].params.get("num_warps") != "64"
    assert t.optimize_sites(src) == t.optimize_sites(src) and len(runs) == 2
    assert FOUND_KEPT >= 2
