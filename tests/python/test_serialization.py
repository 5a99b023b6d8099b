"""oneflow.save / oneflow.load: round trips, atomic writes and error messages."""

import io
import os
import pathlib
import pickle
from collections import OrderedDict

import pytest

import oneflow as flow
import oneflow.nn as nn
import oneflow.optim as optim


def _files(directory):
    return sorted(os.listdir(directory))


def test_state_dict_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    model(flow.randn(5, 3))  # moves the running statistics and num_batches_tracked
    path = tmp_path / "model.pt"
    flow.save(model.state_dict(), str(path))
    loaded = flow.load(str(path))
    assert isinstance(loaded, OrderedDict)
    assert list(loaded.keys()) == list(model.state_dict().keys())
    for key, value in model.state_dict().items():
        assert loaded[key].dtype == value.dtype, key
        assert tuple(loaded[key].shape) == tuple(value.shape), key
        assert loaded[key].tolist() == value.tolist(), key
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict(loaded)
    x = flow.randn(2, 3)
    model.eval()
    fresh.eval()
    assert fresh(x).tolist() == model(x).tolist()


def test_nested_containers_and_dtypes(tmp_path):
    obj = {
        "epoch": 3,
        "name": "run-1",
        "tensors": [flow.tensor([1, 2, 3]), (flow.tensor([True, False]), flow.tensor(2.5, dtype=flow.float64))],
        "ints32": flow.tensor([[1, -2]], dtype=flow.int32),
        "empty": flow.zeros(0, 3),
        "nested": OrderedDict(a=flow.ones(2, 2)),
    }
    path = tmp_path / "obj.pt"
    flow.save(obj, path)  # a pathlib.Path works too
    loaded = flow.load(path)
    assert loaded["epoch"] == 3 and loaded["name"] == "run-1"
    assert loaded["tensors"][0].tolist() == [1, 2, 3] and loaded["tensors"][0].dtype == flow.int64
    assert isinstance(loaded["tensors"][1], tuple)
    assert loaded["tensors"][1][0].tolist() == [True, False] and loaded["tensors"][1][0].dtype == flow.bool
    assert loaded["tensors"][1][1].item() == 2.5 and loaded["tensors"][1][1].dim() == 0
    assert loaded["tensors"][1][1].dtype == flow.float64
    assert loaded["ints32"].dtype == flow.int32 and loaded["ints32"].tolist() == [[1, -2]]
    assert tuple(loaded["empty"].shape) == (0, 3)
    assert isinstance(loaded["nested"], OrderedDict)
    assert loaded["nested"]["a"].tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_requires_grad_and_parameters_survive(tmp_path):
    p = nn.Parameter(flow.ones(2))
    t = flow.ones(2, requires_grad=True)
    u = flow.ones(2)
    path = tmp_path / "grad.pt"
    flow.save([p, t, u], path)
    lp, lt, lu = flow.load(path)
    assert isinstance(lp, nn.Parameter) and lp.requires_grad and lp.is_leaf
    assert lt.requires_grad and not isinstance(lt, nn.Parameter)
    assert not lu.requires_grad


def test_a_tensor_saved_twice_loads_as_one(tmp_path):
    shared = flow.ones(3)
    path = tmp_path / "shared.pt"
    flow.save({"a": shared, "b": shared, "c": flow.ones(3)}, path)
    loaded = flow.load(path)
    assert loaded["a"] is loaded["b"]
    assert loaded["a"] is not loaded["c"]


def test_whole_module_round_trip(tmp_path):
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    path = tmp_path / "whole.pt"
    flow.save(model, path)
    with pytest.raises(pickle.UnpicklingError, match="refused to load global 'oneflow.nn.modules"):
        flow.load(path)  # a whole Module is code: refused by default
    loaded = flow.load(path, weights_only=False)
    assert repr(loaded) == repr(model)
    assert isinstance(loaded[0].weight, nn.Parameter)
    x = flow.randn(4, 2)
    assert loaded(x).tolist() == model(x).tolist()


def test_optimizer_state_round_trip(tmp_path):
    p = nn.Parameter(flow.ones(2))
    opt = optim.Adam([p], lr=0.1)
    p.grad = flow.ones(2)
    opt.step()
    path = tmp_path / "opt.pt"
    flow.save(opt.state_dict(), path)
    sd = flow.load(path)
    assert sd["state"][0]["step"] == 1
    assert sd["state"][0]["exp_avg"].tolist() == opt.state[p]["exp_avg"].tolist()
    opt2 = optim.Adam([nn.Parameter(flow.ones(2))], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1


def test_map_location_cpu(tmp_path):
    path = tmp_path / "cpu.pt"
    flow.save({"w": flow.ones(2)}, path)
    assert str(flow.load(path, map_location="cpu")["w"].device) == "cpu"
    assert str(flow.load(path, map_location=flow.device("cpu"))["w"].device) == "cpu"
    assert str(flow.load(path, map_location={"cpu": "cpu"})["w"].device) == "cpu"


def test_file_objects():
    buffer = io.BytesIO()
    flow.save({"w": flow.tensor([1.5, 2.5])}, buffer)
    buffer.seek(0)
    assert flow.load(buffer)["w"].tolist() == [1.5, 2.5]


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "ckpt.pt"
    flow.save({"v": flow.ones(2)}, path)
    assert _files(tmp_path) == ["ckpt.pt"]
    flow.save({"v": flow.zeros(2)}, path)  # overwrite
    assert _files(tmp_path) == ["ckpt.pt"]
    assert flow.load(path)["v"].tolist() == [0.0, 0.0]


def test_failed_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "ckpt.pt"
    flow.save({"v": flow.ones(2)}, path)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        flow.save({"v": flow.zeros(2), "fn": lambda: None}, path)  # lambdas do not pickle
    assert _files(tmp_path) == ["ckpt.pt"]
    assert flow.load(path)["v"].tolist() == [1.0, 1.0]


def test_saved_file_permissions_follow_the_umask(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    path = tmp_path / "perm.pt"
    flow.save(1, path)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def test_missing_file_error():
    path = "/nonexistent/dir/model.pt"
    with pytest.raises(FileNotFoundError) as info:
        flow.load(path)
    assert str(info.value) == "oneflow.load: no such file '/nonexistent/dir/model.pt'"


def test_missing_directory_on_save():
    with pytest.raises(FileNotFoundError) as info:
        flow.save(1, "/nonexistent/dir/model.pt")
    assert str(info.value) == (
        "oneflow.save: cannot write '/nonexistent/dir/model.pt': directory '/nonexistent/dir' does not exist"
    )


def test_foreign_files_are_rejected(tmp_path):
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(RuntimeError) as info:
        flow.load(plain)
    assert str(info.value) == f"oneflow.load: '{plain}' is not a file written by oneflow.save"
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(RuntimeError) as info:
        flow.load(str(text))
    assert str(info.value).startswith(
        f"oneflow.load: '{text}' is not a file written by oneflow.save or torch.save (")


def test_directory_is_rejected(tmp_path):
    with pytest.raises(IsADirectoryError) as info:
        flow.load(tmp_path)
    assert str(info.value) == (
        f"oneflow.load: '{tmp_path}' is a directory but not a sharded checkpoint (no "
        f"metadata.json); expected a file written by oneflow.save or a directory written by "
        f"oneflow.save(..., sharded=True)"
    )


def test_pathlib_and_str_paths_agree(tmp_path):
    flow.save([flow.ones(1)], str(tmp_path / "a.pt"))
    assert flow.load(pathlib.Path(tmp_path / "a.pt"))[0].tolist() == [1.0]


def test_dtypes_inside_objects(tmp_path):
    path = tmp_path / "cfg.pt"
    flow.save({"dtype": flow.float64, "w": flow.ones(1)}, path)
    loaded = flow.load(path)
    assert loaded["dtype"] == flow.float64


def test_whole_optimizer_round_trip_keeps_its_state_keyed_by_parameter(tmp_path):
    p = nn.Parameter(flow.ones(2))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = flow.ones(2)
    opt.step()
    path = tmp_path / "whole_opt.pt"
    flow.save(opt, path)
    loaded = flow.load(path, weights_only=False)
    loaded_p = loaded.param_groups[0]["params"][0]
    assert loaded.state[loaded_p]["momentum_buffer"].tolist() == [1.0, 1.0]


def test_save_global_dst_rank_must_be_a_rank_of_the_job(tmp_path):
    with pytest.raises(ValueError, match=r"oneflow.save: global_dst_rank 1 is not a rank of this "
                       r"job \(world size 1\)"):
        flow.save({"w": flow.ones(2)}, str(tmp_path / "x.of"), global_dst_rank=1)
    assert not (tmp_path / "x.of").exists()
