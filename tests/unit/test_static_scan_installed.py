"""The correctness gate's static scan counts only the lines a rewrite wrote into a carried copy of an installed
module: the package's own lines are trusted by provenance (FlagGems's bmm reads os.environ at import, and its
unchanged copy failed the scan: RESULTS.md#wild), a line a candidate adds is judged."""

import pytest

from klineage.gates.correctness import written_lines
from klineage.guards import static_findings
from klineage.program import Program

SOURCE = "import os\n\nFLAG = os.environ.get('X')\n"


def test_only_the_given_lines_count():
    sources = {"module pkg.mod": SOURCE}
    assert [f.code for f in static_findings(sources)] == ["static_ban"]
    assert static_findings(sources, {"module pkg.mod": {0}}) == []
    added = SOURCE + "LEAK = os.environ\n"
    (found,) = static_findings({"module pkg.mod": added}, {"module pkg.mod": {0, 4}})
    assert "line 4" in found.detail


def test_a_carried_installed_module_is_judged_on_what_a_rewrite_wrote():
    pytest.importorskip("liger_kernel")
    from klineage.policy.names import installed_source

    name = "liger_kernel.ops.fused_moe_kernels"
    installed = installed_source(name)
    if installed is None or "os.environ" not in installed:
        pytest.skip("this liger_kernel's module reads no environment")
    unchanged = Program("p", "class ModelNew: pass\n", modules={name: installed})
    sources = {f"module {name}": installed}
    assert static_findings(sources) and static_findings(sources, written_lines(unchanged)) == []
    rewritten = unchanged.with_module(name, installed + "\nLEAK = os.environ\n")
    sources = {f"module {name}": rewritten.modules[name]}
    (found,) = static_findings(sources, written_lines(rewritten))
    assert f"line {len(rewritten.modules[name].splitlines())}" in found.detail
