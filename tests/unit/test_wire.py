"""The wire between the judge and the candidate: values only, sizes capped before parsing, nothing executed."""

import json
import os
import pickle
import struct

import pytest
import torch

from klineage.wire import WireError, pack_values, read_frame, tensor, unpack_inputs, write_frame


def _roundtrip(tensors, meta, **limits):
    r, w = os.pipe()
    try:
        write_frame(w, tensors, meta)
        os.close(w)
        return read_frame(r, **limits)
    finally:
        os.close(r)


def _raw_frame(header: bytes, body: bytes = b"", declared: int | None = None):
    r, w = os.pipe()
    os.write(w, struct.pack("<Q", len(header) if declared is None else declared) + header + body)
    os.close(w)
    return r


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_values_survive_and_come_back_contiguous(dtype):
    x = (torch.randn(6, 8) * 3).to(dtype).t()  # a transposed view: strides are not carried, values are
    frame = _roundtrip({"a": x}, {"k": [1, 2]})
    got = tensor(frame, "a", str(dtype).removeprefix("torch."), (8, 6))
    assert got.is_contiguous() and got.dtype == dtype
    assert torch.equal(got, x)
    assert frame.meta == {"k": [1, 2]}


def test_empty_tensor_and_no_tensors():
    frame = _roundtrip({"e": torch.empty(0, 3)}, {})
    assert tensor(frame, "e", "float32", (0, 3)).shape == (0, 3)
    assert _roundtrip({}, {"only": "meta"}).meta == {"only": "meta"}


def test_the_judge_names_the_dtype_and_shape_it_expects():
    frame = _roundtrip({"a": torch.zeros(4)}, {})
    with pytest.raises(WireError, match="expected float64"):
        tensor(frame, "a", "float64", (4,))
    with pytest.raises(WireError, match="expected"):
        tensor(frame, "a", "float32", (2, 2))
    with pytest.raises(WireError, match="no tensor"):
        tensor(frame, "b")


def test_an_oversized_header_is_refused_before_it_is_read():
    r = _raw_frame(b"", declared=2**40)
    with pytest.raises(WireError, match="over the limit"):
        read_frame(r)
    os.close(r)


def test_a_body_over_the_limit_or_with_lying_offsets_is_refused():
    header = json.dumps({"tensors": {"a": {"dtype": "float32", "shape": [4], "offsets": [0, 16]}}, "meta": {}}).encode()
    r = _raw_frame(header, bytes(16))
    with pytest.raises(WireError):
        read_frame(r, body_limit=8)
    os.close(r)
    lying = json.dumps({"tensors": {"a": {"dtype": "float32", "shape": [4], "offsets": [0, 8]}}, "meta": {}}).encode()
    r = _raw_frame(lying, bytes(8))
    with pytest.raises(WireError, match="do not hold"):
        read_frame(r)
    os.close(r)


@pytest.mark.parametrize(
    "header",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"tensors": {}, "meta": 3}).encode(),
        json.dumps({"tensors": {"a": {"dtype": "object", "shape": [1], "offsets": [0, 8]}}, "meta": {}}).encode(),
        json.dumps({"tensors": {"a": {"dtype": "float32", "shape": [-1], "offsets": [0, 4]}}, "meta": {}}).encode(),
        b"[" * 20000 + b"]" * 20000,  # under a pipe buffer: the test writes before it reads
    ],
)
def test_malformed_headers_are_wire_errors(header):
    r = _raw_frame(header, bytes(8))
    with pytest.raises(WireError):
        read_frame(r)
    os.close(r)


def test_a_pickle_is_not_executed():
    """Bytes a candidate could send to make a pickle reader run its code are, to the wire, a malformed header."""

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch /tmp/klineage-wire-pwned",))

    r = _raw_frame(pickle.dumps(Boom()))
    with pytest.raises(WireError):
        read_frame(r)
    os.close(r)
    assert not os.path.exists("/tmp/klineage-wire-pwned")


def test_a_cut_frame_and_a_closed_pipe():
    header = json.dumps({"tensors": {"a": {"dtype": "int8", "shape": [8], "offsets": [0, 8]}}, "meta": {}}).encode()
    r = _raw_frame(header, bytes(3))
    with pytest.raises(WireError, match="cut"):
        read_frame(r)
    os.close(r)
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(EOFError):
        read_frame(r)
    os.close(r)


def test_inputs_with_scalars_round_trip():
    values = [torch.arange(5), 3, 0.5, None, (2, 3), "mean"]
    tensors, described = pack_values(values, "in")
    frame = _roundtrip(tensors, {"inputs": described})
    back = unpack_inputs(frame, frame.meta["inputs"])
    assert torch.equal(back[0], values[0]) and back[1:] == values[1:]
    _, odd = pack_values([object()], "out")
    assert odd == [{"type": "object"}]


# --- bodies through a shared region (wire.Bulk) --------------------------------------------------------------------


def _bulk_roundtrip(tensors, meta, bulk=None, **limits):
    from klineage.wire import Bulk

    bulk = bulk or Bulk.create("test")
    r, w = os.pipe()
    try:
        write_frame(w, tensors, meta, bulk)
        os.close(w)
        return read_frame(r, bulk=bulk, **limits), bulk
    finally:
        os.close(r)


def test_a_body_through_the_shared_region_keeps_values_and_alignment():
    values = {"b": torch.tensor([True, False, True]), "f": torch.randn(5, 7).t(), "h": torch.randn(3).half()}
    frame, bulk = _bulk_roundtrip(values, {"k": 1})
    assert frame.meta == {"k": 1}
    for name, x in values.items():
        got = tensor(frame, name, str(x.dtype).removeprefix("torch."), tuple(x.shape))
        assert got.is_contiguous() and torch.equal(got, x)
    assert all(start % 64 == 0 for _, _, (start, _) in frame.tensors.values())  # the float32 after 3 bools too
    bulk.close()


def test_what_the_writer_changes_after_the_header_does_not_reach_a_built_tensor():
    frame, bulk = _bulk_roundtrip({"a": torch.zeros(1000)}, {})
    got = tensor(frame, "a", "float32", (1000,))
    os.pwrite(bulk.fd, b"\xff" * 4000, 0)  # the other side overwrites the region later
    assert torch.equal(got, torch.zeros(1000)) and not torch.equal(tensor(frame, "a"), torch.zeros(1000))
    bulk.close()


def test_the_shared_region_grows_by_its_owner_and_never_shrinks():
    from klineage.wire import Bulk

    owner = Bulk.create("test")
    asked = []

    def grow(size):  # the candidate's side: it asks; here the "judge" is the same process
        asked.append(size)
        os.ftruncate(owner.fd, size)

    writer = Bulk(owner.fd, grow=grow)
    frame, _ = _bulk_roundtrip({"a": torch.arange(300_000)}, {}, writer)
    assert asked and asked[0] >= 300_000 * 8 and torch.equal(tensor(frame, "a"), torch.arange(300_000))
    _bulk_roundtrip({"a": torch.arange(10)}, {}, writer)  # a smaller frame reuses the region
    assert len(asked) == 1
    with pytest.raises(PermissionError):
        os.ftruncate(owner.fd, 0)  # sealed: a reader's mapping can never fault
    with pytest.raises(PermissionError):
        import fcntl

        fcntl.fcntl(owner.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_GROW)  # nor can the other side block its growth
    owner.close()


def test_a_bulk_header_without_a_region_or_past_its_end_is_refused():
    from klineage.wire import Bulk

    header = {"tensors": {"a": {"dtype": "float32", "shape": [4], "offsets": [0, 16]}}, "meta": {}, "bulk": True}
    r = _raw_frame(json.dumps(header).encode())
    with pytest.raises(WireError, match="no"):
        read_frame(r)  # the judge gave this reader no region
    os.close(r)
    bulk = Bulk.create("test")
    r = _raw_frame(json.dumps(header).encode())
    with pytest.raises(WireError, match="holds 0"):
        read_frame(r, bulk=bulk)  # the region was never grown to hold it
    os.close(r)
    misaligned = {**header, "tensors": {**header["tensors"], "b": {"dtype": "int8", "shape": [1], "offsets": [16, 17]}}}
    os.ftruncate(bulk.fd, 4096)
    r = _raw_frame(json.dumps(misaligned).encode())
    with pytest.raises(WireError, match="do not hold"):
        read_frame(r, bulk=bulk)  # the second tensor must start at 64
    os.close(r)
    bulk.close()
