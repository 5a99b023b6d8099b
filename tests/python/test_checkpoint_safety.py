"""Checkpoints never run code, and the formats other tools write are read and written exactly.

- flow.load refuses every global a checkpoint may not hold, before building it (the marker file
  a malicious pickle would create never appears), in our format and in PyTorch's two formats.
- Round trips, bit for bit, every dtype: ours -> ours, ours -> PyTorch (torch.load), PyTorch ->
  ours (zip and legacy formats), safetensors both ways (files written by hand from the
  specification stand for other writers).
- Truncated, empty and random files, and malformed safetensors headers: one line each, and the
  model is left as it was.
"""

import collections
import io
import json
import os
import pickle
import struct
import subprocess
import zipfile

import numpy as np
import pytest

import oneflow as flow
import oneflow.nn as nn
from oneflow import serialization
from oneflow.utils.safetensors import load, load_file, safe_open, save, save_file

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _sample(dtype, shape=(3, 5), seed=0):
    """A tensor of dtype whose bytes exercise the format: negatives, NaN, -0.0, extremes."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return flow.tensor(rng.random(shape) < 0.5)
    if dtype in ("uint8", "int8", "int32", "int64"):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        a.flat[0], a.flat[1] = info.min, info.max
        return flow.tensor(a)
    a = rng.standard_normal(shape).astype(np.float32) * 100
    a.flat[0], a.flat[1], a.flat[2] = np.nan, -0.0, np.inf
    t = flow.tensor(a)
    return t.to(getattr(flow, dtype))


def _bits(t):
    return (str(t.dtype), tuple(t.shape), t._raw_bytes())


def _torch_bits(torch, t):
    if t.dtype == torch.bfloat16:
        raw = t.contiguous().view(torch.int16).numpy().tobytes()
    else:
        raw = t.contiguous().numpy().tobytes()
    return (str(t.dtype).replace("torch.", "oneflow."), tuple(t.shape), raw)


# ---- code in a checkpoint is refused before it runs ----


class _Call:
    """Pickles as a call of fn(*args): what a malicious checkpoint holds."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


def _evil_payloads(marker):
    touch = f"open({str(marker)!r}, 'w').close()"
    return {
        "posix.system": _Call(os.system, f"touch {marker}"),
        "subprocess.call": _Call(subprocess.call, ["touch", str(marker)]),
        "subprocess.Popen": _Call(subprocess.Popen, ["touch", str(marker)]),
        "builtins.eval": _Call(eval, touch),
        "builtins.exec": _Call(exec, touch),
    }


def _our_file(obj):
    """The bytes flow.save would write for obj (its own pickler, so tensors are stored as ours)."""
    buf = io.BytesIO()
    serialization._make_pickler(buf).dump({"__oneflow_save_format__": 1, "object": obj})
    return buf.getvalue()


def _torch_zip_with(pkl):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/version", b"3\n")
    return out.getvalue()


def _torch_legacy_with(pkl):
    return b"".join(pickle.dumps(x, protocol=2) for x in (
        0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True})) + pkl


@pytest.mark.parametrize("wrap", ["ours", "nested", "torch_zip", "torch_legacy"])
@pytest.mark.parametrize("name", ["posix.system", "subprocess.call", "subprocess.Popen",
                                  "builtins.eval", "builtins.exec"])
def test_malicious_checkpoints_are_refused_before_they_run(tmp_path, wrap, name):
    marker = tmp_path / "pwned"
    payload = _evil_payloads(marker)[name]
    if wrap == "ours":
        data = _our_file({"w": flow.ones(2), "x": payload})
    elif wrap == "nested":  # deep inside an OrderedDict, after a tensor
        data = _our_file(collections.OrderedDict(
            a=flow.ones(1), b=collections.OrderedDict(c=[1, (2, payload)])))
    elif wrap == "torch_zip":
        data = _torch_zip_with(pickle.dumps({"x": payload}, protocol=2))
    else:
        data = _torch_legacy_with(pickle.dumps({"x": payload}, protocol=2))
    path = tmp_path / "model.pt"
    path.write_bytes(data)
    with pytest.raises(pickle.UnpicklingError) as info:
        flow.load(path)
    message = str(info.value)
    assert message.startswith(f"oneflow.load: '{path}': refused to load global '{name}'")
    assert "weights_only=False" in message and "\n" not in message
    assert not marker.exists()
    # The same bytes handed to every rank by global_src_rank go through the same reader.
    with pytest.raises(pickle.UnpicklingError, match=f"refused to load global '{name}'"):
        flow.load(io.BytesIO(data))
    assert not marker.exists()


def test_object_state_cannot_be_set_except_on_ordered_dicts(tmp_path):
    # PROTO 2, EMPTY_LIST, EMPTY_DICT, 'a': 1 (SETITEM), BUILD, STOP: state for a list.
    path = tmp_path / "build.pt"
    path.write_bytes(b"\x80\x02]}X\x01\x00\x00\x00aK\x01sb.")
    with pytest.raises(pickle.UnpicklingError, match=r"refused to set the state of a list"):
        flow.load(path)


def test_files_cannot_name_other_attributes_of_oneflow(tmp_path):
    # Our files store dtypes by name; a name that is not a dtype (here flow.save) is refused.
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("oneflow.dtype", "save", None) if obj == "marker" else None

    buf = io.BytesIO()
    Pickler(buf, protocol=4).dump({"__oneflow_save_format__": 1, "object": "marker"})
    path = tmp_path / "dtype.pt"
    path.write_bytes(buf.getvalue())
    with pytest.raises(RuntimeError, match=r"unknown dtype 'save'"):
        flow.load(path)


def test_weights_only_false_is_the_opt_out_and_warns(tmp_path):
    path = tmp_path / "upper.pt"
    path.write_bytes(_our_file(_Call(str.upper, "abc")))
    with pytest.raises(pickle.UnpicklingError, match=r"refused to load global 'builtins.getattr'"):
        flow.load(path)
    serialization._warned_unsafe.clear()
    with pytest.warns(UserWarning, match=r"weights_only=False\) runs any code"):
        assert flow.load(path, weights_only=False) == "ABC"


def test_what_save_writes_loads_by_default(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    opt = flow.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9))
    model(flow.randn(5, 3)).sum().backward()
    opt.step()
    sched = flow.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    P = flow.placement("cpu", ranks=[0])
    obj = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
           "meta": {"dtype": flow.bfloat16, "device": flow.device("cpu"), "placement": P,
                    "sbp": (flow.sbp.split(1), flow.sbp.broadcast, flow.sbp.partial_sum),
                    "set": {1, 2}, "frozen": frozenset({3}), "bytes": b"\x00\xff",
                    "complex": 1 + 2j, "none": None, "tuple": (1.5, "x")}}
    path = tmp_path / "all.pt"
    flow.save(obj, path)
    got = flow.load(path)
    assert got["meta"] == obj["meta"]
    assert got["opt"]["param_groups"] == obj["opt"]["param_groups"]
    assert got["sched"] == obj["sched"]
    for k, v in obj["model"].items():
        assert _bits(got["model"][k]) == _bits(v)


# ---- round trips, bit for bit ----


def test_every_dtype_round_trips_through_our_format(tmp_path):
    tensors = {d: _sample(d, seed=i) for i, d in enumerate(DTYPES)}
    flow.save(tensors, tmp_path / "all.pt")
    got = flow.load(tmp_path / "all.pt")
    for d in DTYPES:
        assert _bits(got[d]) == _bits(tensors[d]), d


def test_our_torch_format_file_loads_in_pytorch(tmp_path, torch):
    tensors = {d: _sample(d, seed=i) for i, d in enumerate(DTYPES)}
    tensors["empty"] = flow.zeros(0, 3)
    tensors["scalar"] = flow.tensor(2.5)
    path = tmp_path / "for_torch.pt"
    flow.save(tensors, path, torch_format=True)
    got = torch.load(path, weights_only=True)
    assert sorted(got) == sorted(tensors)
    for k, t in tensors.items():
        assert _torch_bits(torch, got[k]) == _bits(t), k


def test_a_state_dict_saved_for_torch_drives_the_same_torch_model(tmp_path, torch):
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model.train(False)
    path = tmp_path / "sd.pt"
    flow.save(model.state_dict(), path, torch_format=True)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    ref.load_state_dict(torch.load(path, weights_only=True))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    assert ref(torch.tensor(x)).detach().numpy().tobytes() == \
        model(flow.tensor(x)).detach().numpy().tobytes()
    # Parameters stay parameters, tied tensors stay one tensor, dtypes and plain data travel.
    w = nn.Parameter(flow.ones(2))
    flow.save({"a": w, "b": w, "dtype": flow.float16, "lr": [0.1, 2]}, path, torch_format=True)
    got = torch.load(path)
    assert isinstance(got["a"], torch.nn.Parameter) and got["a"].requires_grad
    assert got["a"] is got["b"]
    assert got["dtype"] is torch.float16 and got["lr"] == [0.1, 2]


def test_torch_format_refuses_what_pytorch_cannot_hold(tmp_path):
    with pytest.raises(pickle.PicklingError, match=r"a PyTorch file cannot hold "
                       r"oneflow.placement\(type=\"cpu\", ranks=\[0\]\); save it in oneflow's own"):
        flow.save({"p": flow.placement("cpu", ranks=[0])}, tmp_path / "x.pt", torch_format=True)
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize("zip_format", [True, False])
def test_pytorch_files_load_without_pytorch_code(tmp_path, torch, zip_format):
    g = torch.Generator().manual_seed(0)
    tensors = {
        "float32": torch.randn(3, 4, generator=g), "float64": torch.randn(2, dtype=torch.float64),
        "float16": torch.randn(5, generator=g).half(), "bfloat16": torch.randn(5).bfloat16(),
        "int64": torch.tensor([-(2 ** 63), 2 ** 63 - 1]), "int32": torch.tensor([-7, 2 ** 31 - 1],
                                                                               dtype=torch.int32),
        "int8": torch.tensor([-128, 127], dtype=torch.int8), "uint8": torch.tensor([0, 255],
                                                                                   dtype=torch.uint8),
        "bool": torch.tensor([True, False]), "scalar": torch.tensor(3.0), "empty": torch.zeros(0, 2),
    }
    base = torch.arange(24.0).reshape(4, 6)
    tensors["view"] = base[1:, 2:5]  # offset and strides into a shared storage
    tensors["transposed"] = base.t()
    tensors["param"] = torch.nn.Parameter(torch.randn(2, 2))
    path = tmp_path / "from_torch.pt"
    torch.save(tensors, path, _use_new_zipfile_serialization=zip_format)
    got = flow.load(path)
    for k, t in tensors.items():
        assert _bits(got[k]) == _torch_bits(torch, t.detach()), k
    assert isinstance(got["param"], nn.Parameter) and got["param"].requires_grad
    assert not got["view"].requires_grad


def test_a_pytorch_state_dict_loads_into_our_model(tmp_path, torch):
    ref = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    ref(torch.randn(8, 4))  # moves the running statistics
    ref.eval()
    path = tmp_path / "torch_model.pt"
    torch.save(ref.state_dict(), path)  # an OrderedDict with _metadata, set by BUILD
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    model.load_state_dict(flow.load(path))
    model.train(False)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(model(flow.tensor(x)).detach().numpy(),
                               ref(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_pytorch_dtypes_we_lack_are_named(tmp_path, torch):
    path = tmp_path / "int16.pt"
    torch.save({"x": torch.zeros(2, dtype=torch.int16)}, path)
    with pytest.raises(RuntimeError, match=r": torch.ShortStorage \(int16\) has no oneflow dtype; "):
        flow.load(path)


def test_map_location_applies_to_pytorch_files(tmp_path, torch):
    path = tmp_path / "m.pt"
    torch.save({"w": torch.ones(2)}, path)
    seen = []
    got = flow.load(path, map_location=lambda t, where: seen.append(where) or t * 2)
    assert seen == ["cpu"] and got["w"].tolist() == [2.0, 2.0]


# ---- safetensors ----


def _hand_written(entries, metadata=None, pad=False):
    """A safetensors file written from the specification, in the given order (not ours)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, code, shape, raw in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def test_safetensors_round_trip_every_dtype(tmp_path):
    tensors = {d: _sample(d, seed=i) for i, d in enumerate(DTYPES)}
    tensors["empty"] = flow.zeros(0, 4)
    save_file(tensors, tmp_path / "m.safetensors", metadata={"format": "pt", "step": "7"})
    got = load_file(tmp_path / "m.safetensors")
    assert sorted(got) == sorted(tensors)
    for k, t in tensors.items():
        assert _bits(got[k]) == _bits(t), k
    with safe_open(tmp_path / "m.safetensors", framework="pt") as f:
        assert f.metadata() == {"format": "pt", "step": "7"}
        assert f.keys() == sorted(tensors)
        assert _bits(f.get_tensor("int8")) == _bits(tensors["int8"])
    assert {k: _bits(v) for k, v in load(save(tensors)).items()} == \
        {k: _bits(v) for k, v in tensors.items()}


def test_our_safetensors_file_follows_the_specification(tmp_path):
    a = flow.tensor(np.arange(6, dtype=np.float64).reshape(2, 3))
    b = flow.tensor(np.array([1, -2, 3], dtype=np.int32))
    c = flow.tensor(np.array([True, False]))
    data = save({"b": b, "c": c, "a": a}, metadata={"k": "v"})
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0  # the header is padded so the data starts aligned
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    assert header["__metadata__"] == {"k": "v"}
    expected = {"a": ("F64", [2, 3], np.arange(6, dtype="<f8").tobytes()),
                "b": ("I32", [3], np.array([1, -2, 3], dtype="<i4").tobytes()),
                "c": ("BOOL", [2], b"\x01\x00")}
    for name, (code, shape, raw) in expected.items():
        begin, end = header[name]["data_offsets"]
        assert header[name]["dtype"] == code and header[name]["shape"] == shape
        assert body[begin:end] == raw
    assert sorted(e["data_offsets"][1] for k, e in header.items() if k != "__metadata__")[-1] == len(body)


def test_safetensors_files_of_other_writers(tmp_path):
    a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    bf16 = (np.array([1.0, -2.5, 3.25], dtype=np.float32).view(np.uint32) >> 16).astype("<u2")
    f16 = np.array([0.5, 65504.0], dtype="<f2")
    path = tmp_path / "other.safetensors"
    # Unsorted names, unaligned data, no padding: all legal.
    path.write_bytes(_hand_written([("z.bool", "BOOL", (1,), b"\x01"), ("a.f32", "F32", (3, 4), a.tobytes()),
                                    ("m.bf16", "BF16", (3,), bf16.tobytes()),
                                    ("h.f16", "F16", (2,), f16.tobytes())], metadata={"by": "hand"}))
    got = load_file(path)
    assert got["a.f32"].numpy().tobytes() == a.tobytes()
    assert got["m.bf16"].float().tolist() == [1.0, -2.5, 3.25]
    assert got["h.f16"].numpy().tobytes() == f16.tobytes()
    assert got["z.bool"].tolist() == [True]
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == {"by": "hand"}


@pytest.mark.parametrize("case,message", [
    ("past_end", r"the tensors end at byte 16 of the data but the file holds 8 bytes of data \(truncated\?\)"),
    ("overlap", r"tensor 'b' at data_offsets \[4, 12\] overlaps the tensor before it"),
    ("hole", r"tensor 'b' at data_offsets \[12, 20\] leaves bytes 8..12 unused"),
    ("dtype", r"tensor 'a' has unknown dtype 'F128'"),
    ("lacking", r"tensor 'a' has dtype I16, which oneflow does not have"),
    ("size", r"tensor 'a' of shape \(3,\) and dtype F32 needs 12 bytes but data_offsets \[0, 8\] span 8"),
    ("header_length", r"header length 1000 runs past the end of the file"),
    ("not_json", r"the header is not JSON"),
    ("tiny", r"the file holds 3 bytes, less than the 8-byte header length"),
])
def test_malformed_safetensors_are_refused_in_one_line(tmp_path, case, message):
    blob = bytes(range(16))
    files = {
        "past_end": _hand_written([("a", "F32", (4,), blob)])[:-8],
        "overlap": _hand_written([("a", "F32", (2,), blob[:8])]).replace(b"}}", b"}}", 1),
        "dtype": _hand_written([("a", "F128", (1,), blob)]),
        "lacking": _hand_written([("a", "I16", (4,), blob[:8])]),
        "size": _hand_written([("a", "F32", (3,), blob[:8])]),
        "header_length": struct.pack("<Q", 1000) + b"{}",
        "not_json": struct.pack("<Q", 4) + b"{no}",
        "tiny": b"\x01\x02\x03",
    }
    if case in ("overlap", "hole"):
        b_offsets = [4, 12] if case == "overlap" else [12, 20]
        header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": b_offsets}}
        text = json.dumps(header).encode()
        files[case] = struct.pack("<Q", len(text)) + text + bytes(b_offsets[1])
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(files[case])
    with pytest.raises(ValueError) as info:
        load_file(path)
    assert str(info.value).startswith(f"safe_open: '{path}': ")
    assert "\n" not in str(info.value)
    assert __import__("re").search(message, str(info.value)), str(info.value)


# ---- broken files: one line, nothing half-loaded ----


def _model():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _good_files(tmp_path, torch):
    model = _model()
    files = {"ours": tmp_path / "ours.pt", "torch_zip": tmp_path / "zip.pt"}
    flow.save(model.state_dict(), files["ours"])
    flow.save(model.state_dict(), files["torch_zip"], torch_format=True)
    if torch is not None:
        files["torch_legacy"] = tmp_path / "legacy.pt"
        sd = torch.load(files["torch_zip"])
        torch.save(sd, files["torch_legacy"], _use_new_zipfile_serialization=False)
    return files


def test_truncated_empty_and_random_files_fail_in_one_line(tmp_path):
    try:
        import torch
    except ImportError:
        torch = None
    model = _model()
    before = {k: _bits(v) for k, v in model.state_dict().items()}
    broken = {}
    for kind, path in _good_files(tmp_path, torch).items():
        data = path.read_bytes()
        for cut in (1, 9, len(data) // 3, len(data) // 2, len(data) - 40, len(data) - 1):
            broken[f"{kind}_cut{cut}"] = data[:cut]
    broken["empty"] = b""
    rng = np.random.default_rng(123)
    for i in range(20):
        broken[f"random{i}"] = rng.integers(0, 256, size=int(rng.integers(1, 4000)),
                                            dtype=np.uint8).tobytes()
    for name, data in broken.items():
        path = tmp_path / f"{name}.bad"
        path.write_bytes(data)
        with pytest.raises(Exception) as info:
            model.load_state_dict(flow.load(path))
        message = str(info.value)
        assert "\n" not in message, (name, message)
        assert message.startswith(f"oneflow.load: '{path}'"), (name, message)
        if name == "empty":
            assert message.endswith("is not a file written by oneflow.save or torch.save "
                                    "(the file is empty)")
    assert {k: _bits(v) for k, v in model.state_dict().items()} == before


def test_a_failed_load_state_dict_copies_nothing():
    model = _model()
    before = {k: _bits(v) for k, v in model.state_dict().items()}
    state = {k: flow.zeros(*v.shape) for k, v in model.state_dict().items()}
    state["2.bias"] = flow.zeros(3)  # the last entry does not fit
    with pytest.raises(RuntimeError, match=r"size mismatch for 2.bias"):
        model.load_state_dict(state)
    assert {k: _bits(v) for k, v in model.state_dict().items()} == before
