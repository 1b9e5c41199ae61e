import torch

from klineage.compare import POISON_BYTE
from klineage.guards import check_guards, guarded_empty, static_findings


def test_guarded_allocation_is_poisoned_aligned_and_checked():
    log = []
    t = guarded_empty((10, 3), (3, 1), torch.float32, "cpu", 1024, "empty", log)
    assert t.shape == (10, 3) and t.data_ptr() % 256 == 0
    assert torch.isnan(t).all()  # interior poisoned: unwritten elements read as NaN
    t.fill_(1.0)
    assert check_guards(log) is None
    end = log[0].stop
    log[0].buffer[end] = 0  # one byte past the end, inside the 256-byte rounding
    finding = check_guards(log)
    assert finding.code == "out_of_bounds_write" and "after its end" in finding.detail
    log[0].buffer[end] = POISON_BYTE
    log[0].buffer[log[0].start - 1] = 7
    assert "before its start" in check_guards(log).detail


def test_static_scan_flags_what_runtime_cannot_see():
    src = "import ctypes\nimport os\ny = x.numpy()\nv = os.environ['SEED']\n"
    src += "torch.backends.cuda.matmul.allow_tf32 = True\n"
    details = [f.detail for f in static_findings({"program": src})]
    assert any("ctypes" in d for d in details)
    assert any("numpy()" in d for d in details)
    assert any("environ" in d for d in details)
    assert any("allow_tf32" in d for d in details)
    assert static_findings({"program": "import triton\nx = torch.empty(3)\n"}) == []
