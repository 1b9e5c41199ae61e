"""Tensors between the judge and the candidate process, as bytes no one executes.

A frame is an 8-byte little-endian header length, a JSON header `{"tensors": {name: {dtype, shape, offsets}},
"meta": {...}}`, then the raw bytes of every tensor, contiguous, in little-endian order (safetensors' layout). The
reader caps the header and the body before it parses anything, and builds tensors only where the judge asks for a
name with the dtype and shape it expects: what the candidate claims about a tensor (its strides, its device, its
type) proves nothing, so nothing of it is kept. Nothing read here is unpickled, imported or executed: `json.loads`
and `torch.frombuffer` are the only parsers.

Both sides use the same code: the judge's requests (inputs, a case's init inputs) are frames too."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field

# what one frame may hold at most unless the reader says otherwise: a header of evidence (launch rows, functions run)
# is kilobytes; a body is the outputs of one call, which the judge bounds by what it expects
HEADER_LIMIT = 4 * 2**20
BODY_LIMIT = 2**34

DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
)


class WireError(ValueError):
    """A frame that is cut, too large or malformed; the reader turns it into a failing verdict."""


@dataclass(frozen=True)
class Frame:
    """A parsed frame: each tensor's dtype name, shape and byte range in `body`, and the JSON `meta`."""

    tensors: dict = field(default_factory=dict)  # name -> (dtype, shape tuple, (start, stop))
    meta: dict = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray, repr=False)


def dtype_of(name: str):
    import torch

    if name not in DTYPES:
        raise WireError(f"dtype {name!r} is not one the wire carries")
    return getattr(torch, name)


def _raw(tensor) -> memoryview:
    """The tensor's bytes in row-major order, on the host: whatever its layout, the frame holds values only."""
    import torch

    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")


def encode(tensors: dict, meta: dict) -> list:
    """The frame for `tensors` (name -> plain tensor, any device, any layout) and a JSON-able `meta`, as a list of
    byte buffers to write in order (no copy of a large body into one bytes object)."""
    import torch

    specs, pieces, offset = {}, [], 0
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} is not a tensor")
        raw = _raw(tensor)
        dtype = str(tensor.dtype).removeprefix("torch.")
        specs[name] = {"dtype": dtype, "shape": list(tensor.shape), "offsets": [offset, offset + raw.nbytes]}
        pieces.append(raw)
        offset += raw.nbytes
    header = json.dumps({"tensors": specs, "meta": meta}, allow_nan=True).encode()
    return [struct.pack("<Q", len(header)), header, *pieces]


def write_frame(fd: int, tensors: dict, meta: dict) -> None:
    for piece in encode(tensors, meta):
        view = memoryview(piece).cast("B")
        while view:
            written = os.write(fd, view)
            view = view[written:]


def _read_exact(fd: int, size: int) -> bytearray:
    out = bytearray(size)
    view = memoryview(out)
    got = 0
    while got < size:
        n = os.readv(fd, [view[got:]])
        if n == 0:
            raise WireError(f"frame cut after {got} of {size} bytes")
        got += n
    return out


def read_frame(fd: int, header_limit: int = HEADER_LIMIT, body_limit: int = BODY_LIMIT) -> Frame:
    """One frame from `fd`, its sizes checked against the limits before anything is parsed. Raises WireError on a
    cut, oversized or malformed frame (EOFError at a clean end: the other side closed its end)."""
    first = os.read(fd, 8)
    if not first:
        raise EOFError("the other side closed the pipe")
    if len(first) < 8:
        first = bytes(first) + bytes(_read_exact(fd, 8 - len(first)))
    (size,) = struct.unpack("<Q", first)
    if size > header_limit:
        raise WireError(f"header of {size} bytes, over the limit of {header_limit}")
    header = _parse_header(bytes(_read_exact(fd, size)))
    specs = _specs(header.get("tensors"), body_limit)
    length = max((stop for _, _, (_, stop) in specs.values()), default=0)
    return Frame(specs, header["meta"], _read_exact(fd, length) if length else bytearray())


def _parse_header(raw: bytes) -> dict:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise WireError(f"header is not JSON: {str(e)[:200]}") from None
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
        raise WireError("header is not an object with a meta object")
    return header


def _specs(raw, body_limit: int) -> dict:
    """Validated tensor entries: known dtype, non-negative integer shape, offsets that tile the body in order with
    exactly the bytes the dtype and shape need."""
    import torch

    if not isinstance(raw, dict):
        raise WireError("header has no tensors object")
    specs, expected_start = {}, 0
    for name, spec in raw.items():
        if not isinstance(spec, dict):
            raise WireError(f"tensor {name!r}: entry is not an object")
        dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("offsets")
        if not isinstance(dtype, str):
            _bad(name, "dtype")
        if not isinstance(shape, list) or not all(type(n) is int and 0 <= n < 2**48 for n in shape):
            _bad(name, "shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)):
            _bad(name, "offsets")
        numel = 1
        for n in shape:
            numel *= n
        nbytes = numel * torch.empty((), dtype=dtype_of(dtype)).element_size()
        start, stop = offsets
        if start != expected_start or stop - start != nbytes or stop > body_limit:
            raise WireError(f"tensor {name!r}: bytes [{start}, {stop}) do not hold {shape} {dtype} in order")
        specs[name] = (dtype, tuple(shape), (start, stop))
        expected_start = stop
    return specs


def _bad(name: str, what: str):
    raise WireError(f"tensor {name!r}: malformed {what}")


def tensor(frame: Frame, name: str, dtype: str | None = None, shape: tuple | None = None):
    """The tensor `name` of `frame`, built from its bytes as a fresh contiguous CPU tensor, after checking that it
    is there and, where given, has the dtype and shape the judge expects. WireError otherwise."""
    import torch

    if name not in frame.tensors:
        raise WireError(f"no tensor {name!r} in the frame")
    got_dtype, got_shape, (start, stop) = frame.tensors[name]
    if dtype is not None and got_dtype != dtype:
        raise WireError(f"tensor {name!r} is {got_dtype}, expected {dtype}")
    if shape is not None and got_shape != tuple(shape):
        raise WireError(f"tensor {name!r} has shape {got_shape}, expected {tuple(shape)}")
    torch_dtype = dtype_of(got_dtype)
    if stop == start:
        return torch.empty(got_shape, dtype=torch_dtype)
    raw = torch.frombuffer(frame.body, dtype=torch.uint8, count=stop - start, offset=start).clone()
    if torch_dtype == torch.bool:
        return raw.view(torch.bool).reshape(got_shape)
    return raw.view(torch_dtype).reshape(got_shape)


# --- values: inputs and outputs as JSON with tensors by name ------------------------------------------------------


def pack_values(values: list, prefix: str) -> tuple[dict, list]:
    """(tensors by name, a JSON description) of a list of inputs or outputs: each tensor as `{"tensor": name}`,
    each JSON-able scalar (None, bool, int, float, str, lists of them) as `{"value": v}`, anything else as
    `{"type": its type name}` (the judge fails an output that is not a tensor; a workload input must be one of
    these)."""
    import torch

    tensors, described = {}, []
    for i, value in enumerate(values):
        if isinstance(value, torch.Tensor):
            name = f"{prefix}{i}"
            tensors[name] = value
            described.append({"tensor": name, "stride": list(value.stride())})
        elif _jsonable(value):
            described.append({"value": value, "tuple": True} if isinstance(value, tuple) else {"value": value})
        else:
            described.append({"type": type(value).__name__})
    return tensors, described


def _jsonable(value, depth: int = 0) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)) and depth < 4:
        return all(_jsonable(v, depth + 1) for v in value)
    return False


def unpack_inputs(frame: Frame, described: list) -> list:
    """The candidate's side of pack_values for the judge's own inputs (trusted): tensors by name in the layout the
    judge made them in (a workload's strided input stays strided), scalars as sent."""
    import torch

    out = []
    for item in described:
        if "tensor" in item:
            value = tensor(frame, item["tensor"])
            stride = tuple(item.get("stride") or value.stride())
            if stride != value.stride() and value.numel() > 1:
                value = torch.empty_strided(value.shape, stride, dtype=value.dtype).copy_(value)
            out.append(value)
        elif item.get("tuple"):
            out.append(tuple(item.get("value")))
        else:
            out.append(item.get("value"))
    return out
