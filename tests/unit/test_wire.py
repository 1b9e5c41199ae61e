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
