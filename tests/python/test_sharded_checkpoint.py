"""Sharded checkpoints (oneflow.save(obj, dir, sharded=True), oneflow.load(dir)): saved under
tensor parallel on 4 ranks and on a 2x2 mesh, loaded under data parallel and another tensor
parallel layout on 2 ranks and in one process, bit-identical; Adam's state; a save killed
half-way; the one-line errors. Real processes through the launcher (tests/python/dist)."""

import glob
import json
import os
import shutil
import sys

import numpy as np
import pytest

import oneflow as flow
import oneflow._sharded_checkpoint as sc
from test_comm import DIST, env_with, free_port, launch

sys.path.insert(0, DIST)
from sharded_ckpt_common import batch, flatten, make, same  # noqa: E402


def ok_lines(out):
    return sorted(l.split("] ", 1)[-1] for l in out.splitlines() if l.endswith(" ok"))


def run(nproc, script, *args):
    r = launch("--nproc_per_node", nproc, "--master_port", free_port(),
               os.path.join(DIST, script), *args, timeout=300,
               env=env_with(ONEFLOW_TIMEOUT_SECONDS="30"))
    return r


def meta(path):
    with open(os.path.join(path, "metadata.json")) as f:
        return json.load(f)


def record(m, *keys):
    """The metadata record of the tensor at m["object"][keys[0]][keys[1]]..."""
    node = m["object"]
    for k in keys:
        node = dict(node["items"])[k]
    return m["tensors"][node["id"]]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("sharded"))
    r = run(4, "sharded_ckpt_save.py", folder)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == sorted(f"rank {k} sharded save ok" for k in range(4))
    return folder


def test_each_rank_writes_only_its_own_shards(saved):
    m = meta(os.path.join(saved, "tp4"))
    assert m["format"] == "oneflow-sharded-checkpoint" and m["version"] == 1
    w1 = record(m, "model", "fc1.weight")
    # 10 rows over 4 ranks: 3, 3, 2, 2, each box written by the rank holding it.
    assert [(s["rank"], s["box"]) for s in w1["shards"]] == [
        (0, [[0, 3], [0, 6]]), (1, [[3, 6], [0, 6]]), (2, [[6, 8], [0, 6]]),
        (3, [[8, 10], [0, 6]])]
    assert w1["sbp"] == ["S(0)"] and w1["placement"]["ranks"] == [0, 1, 2, 3]
    w2 = record(m, "model", "fc2.weight")
    assert [s["box"] for s in w2["shards"]] == [[[0, 5], [0, 3]], [[0, 5], [3, 6]],
                                                 [[0, 5], [6, 8]], [[0, 5], [8, 10]]]
    # Broadcast: written once, by the lowest rank.
    b2 = record(m, "model", "fc2.bias")
    assert [(s["rank"], s["box"]) for s in b2["shards"]] == [(0, [[0, 5]])]
    # The partial sum was reduced before writing.
    psum = record(m, "extra", "psum")
    assert psum["sbp"] == ["P"] and psum["stored_sbp"] == ["B"] and len(psum["shards"]) == 1
    # Each file holds exactly its rank's shards, back to back.
    for name, size in m["files"].items():
        mine = sorted((s["offset"], s["nbytes"]) for t in m["tensors"] for s in t["shards"]
                      if s["file"] == name)
        assert os.path.getsize(os.path.join(saved, "tp4", name)) == size == sum(n for _, n in mine)
        assert all(o == sum(n for _, n in mine[:i]) for i, (o, _) in enumerate(mine))
    # 2x2 mesh: (S0, S1) gives four boxes; (B, S0) two, written by the ranks of the first row.
    mm = meta(os.path.join(saved, "mesh"))
    w = record(mm, "fc1.weight")
    assert w["placement"]["hierarchy"] == [2, 2] and w["sbp"] == ["S(0)", "S(1)"]
    assert [(s["rank"], s["box"]) for s in w["shards"]] == [
        (0, [[0, 5], [0, 3]]), (1, [[0, 5], [3, 6]]), (2, [[5, 10], [0, 3]]),
        (3, [[5, 10], [3, 6]])]
    b = record(mm, "fc1.bias")
    assert [(s["rank"], s["box"]) for s in b["shards"]] == [(0, [[0, 5]]), (1, [[5, 10]])]
    assert not glob.glob(os.path.join(saved, ".*"))  # no temporary directory left


def test_one_process_load_gives_whole_local_tensors(saved):
    for name in ("tp4", "mesh"):
        state = flow.load(os.path.join(saved, name))
        expected = np.load(os.path.join(saved, name + ".npz"))
        got = flatten(state)
        assert sorted(got) == sorted(expected.files)
        for k, v in got.items():
            assert same(v, expected[k]), (name, k)
        model_state = state["model"] if name == "tp4" else state
        assert all(isinstance(t, flow.Tensor) and not t.is_global
                   for t in model_state.values())
    state = flow.load(os.path.join(saved, "tp4"))
    assert state["extra"]["steps"] == 3 and state["extra"]["pair"] == (1, 2.5)
    assert state["extra"]["tied"][0] is state["extra"]["tied"][1]
    assert isinstance(state["extra"]["tied"][0], flow.nn.Parameter)
    assert state["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)
    # Into a local model and a local Adam.
    model = make(5)
    model.load_state_dict(state["model"])
    for k, v in model.state_dict().items():
        assert same(v.numpy(), np.load(os.path.join(saved, "tp4.npz"))["model/" + k]), k


def test_tp4_and_mesh_load_on_two_ranks_in_other_layouts(saved):
    # A checkpoint one process wrote joins: loaded under tensor parallel on 2 ranks.
    one = make(3)
    flow.save(one.state_dict(), os.path.join(saved, "one"), sharded=True)
    np.savez(os.path.join(saved, "one.npz"), **flatten(one.state_dict()))
    r = run(2, "sharded_ckpt_load.py", saved)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert ok_lines(r.stdout) == ["rank 0 sharded load ok", "rank 1 sharded load ok"]
    assert "map_location is not supported for a sharded checkpoint in a job of 2 ranks" in r.stdout
    # The Adam step taken on 2 ranks after loading equals the one-process step after loading.
    state = flow.load(os.path.join(saved, "tp4"))
    model = make(9)
    model.load_state_dict(state["model"])
    opt = flow.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(state["opt"])
    (model(batch()) ** 2).sum().backward()
    opt.step()
    dist = np.load(os.path.join(saved, "dp2_step.npz"))
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(v.numpy(), dist[k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_tp4_checkpoint_into_zero_on_two_ranks_reads_each_byte_once(tmp_path):
    """4 MiB weights saved split over 4 ranks, loaded into a ZeRO layout on ranks [0, 1]
    (weights broadcast, moments split): the ranks together read every byte of the shard files
    exactly once, ranks 2 and 3 none, and per tensor no rank's peak (oneflow.cpu, and resident
    memory) rises above 1.3x its shard (plus fixed floors for tiny tensors)."""
    import re

    r = run(4, "sharded_ckpt_zero.py", str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    totals = re.findall(r"rank (\d) read (\d+) bytes of (\d+) in the files", r.stdout)
    assert len(totals) == 4, r.stdout[-3000:]
    assert sum(int(read) for _, read, _ in totals) == int(totals[0][2])
    assert all(int(read) == 0 for k, read, _ in totals if int(k) >= 2)
    loads = re.findall(r"rank (\d) load (\S+): read (\d+) bytes, shard (\d+) bytes, peak (\d+) "
                       r"bytes, resident peak (-?\d+) bytes", r.stdout)
    assert len(loads) == 4 * 9, r.stdout[-3000:]
    for k, key, read, shard, peak, resident in loads:
        read, shard, peak, resident = int(read), int(shard), int(peak), int(resident)
        assert read <= shard, (k, key, read, shard)
        # oneflow.cpu: one 64 KiB staging floor; resident memory: 1 MiB for the interpreter's
        # own pages (a numpy assembly of the 4 MiB weights would add 8 MiB and more)
        assert peak <= 1.3 * shard + (64 << 10), (k, key, shard, peak)
        assert resident <= 1.3 * shard + (1 << 20), (k, key, shard, resident)
        if key.startswith("w_") and shard:
            assert peak <= 1.3 * shard, (k, key, shard, peak)
    # into (B, S(1)) on a 2x2 mesh: each rank reads a quarter, the job each byte once
    mesh = re.findall(r"rank (\d) mesh load read (\d+) bytes of (\d+)", r.stdout)
    assert len(mesh) == 4 and sum(int(read) for _, read, _ in mesh) == int(mesh[0][2]), mesh


def test_adam_state_round_trip_in_one_process(tmp_path):
    model = make(0)
    opt = flow.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        (model(batch()) ** 2).sum().backward()
        opt.step()
    flow.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "c",
              sharded=True)
    state = flow.load(tmp_path / "c")
    fresh = make(1)
    fresh.load_state_dict(state["model"])
    fresh_opt = flow.optim.Adam(fresh.parameters(), lr=0.01)
    fresh_opt.load_state_dict(state["opt"])
    for p, q in zip(model.parameters(), fresh.parameters()):
        assert opt.state[p]["step"] == fresh_opt.state[q]["step"] == 2
        for name in ("exp_avg", "exp_avg_sq"):
            assert same(opt.state[p][name].numpy(), fresh_opt.state[q][name].numpy())
    for m, o in ((model, opt), (fresh, fresh_opt)):  # a third step, the same arithmetic
        o.zero_grad()
        (m(batch()) ** 2).sum().backward()
        o.step()
    for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):
        assert same(a.numpy(), b.numpy())


def test_a_save_killed_half_way_leaves_the_previous_checkpoint(tmp_path):
    r = run(4, "sharded_ckpt_kill.py", str(tmp_path))
    assert r.returncode != 0, r.stdout[-2000:]
    assert "rank 1 dies after its first shard" in r.stdout
    assert "unreachable" not in r.stdout
    stale = glob.glob(str(tmp_path / ".ckpt.saving-*"))
    assert len(stale) == 1 and os.listdir(stale[0])  # the save was under way
    assert "metadata.json" not in os.listdir(stale[0])
    expected = np.load(tmp_path / "before.npz")
    state = flow.load(tmp_path / "ckpt")
    assert sorted(state) == sorted(expected.files)
    for k, v in state.items():
        assert same(v.numpy(), expected[k]), k
    # The next save replaces the checkpoint and removes what the dead one left.
    model = make(4)
    flow.save(model.state_dict(), tmp_path / "ckpt", sharded=True)
    assert not glob.glob(str(tmp_path / ".ckpt.saving-*"))
    for k, v in flow.load(tmp_path / "ckpt").items():
        assert same(v.numpy(), model.state_dict()[k].numpy()), k


@pytest.mark.parametrize("exchange", [True, False])
def test_saving_over_a_checkpoint_replaces_it(tmp_path, monkeypatch, exchange):
    if not exchange:  # a system without renameat2: two renames
        monkeypatch.setattr(sc, "_exchange", lambda a, b: False)
    a, b = make(0), make(1)
    flow.save(a.state_dict(), tmp_path / "c", sharded=True)
    flow.save(b.state_dict(), tmp_path / "c", sharded=True)
    for k, v in flow.load(tmp_path / "c").items():
        assert same(v.numpy(), b.state_dict()[k].numpy()), k
    assert sorted(os.listdir(tmp_path)) == ["c"]


def test_gathered_single_file_form_is_unchanged(tmp_path):
    model = make(0)
    flow.save(model.state_dict(), tmp_path / "m.of")
    assert os.path.isfile(tmp_path / "m.of")
    for k, v in flow.load(tmp_path / "m.of").items():
        assert same(v.numpy(), model.state_dict()[k].numpy())


# ---- one-line errors ----

@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "ckpt"
    flow.save(make(0).state_dict(), path, sharded=True)
    return path


def load_error(path, kind, edit=None):
    """The message of the kind of error flow.load(path) raises, after edit(metadata dict)
    rewrites metadata.json."""
    if edit is not None:
        m = meta(path)
        edit(m)
        (path / "metadata.json").write_text(json.dumps(m))
    with pytest.raises(kind) as info:
        flow.load(path)
    return str(info.value)


def test_missing_shard_file(ckpt):
    os.remove(ckpt / "rank-00000.bin")
    assert load_error(ckpt, FileNotFoundError) == (
        f"oneflow.load: '{ckpt}' is missing shard file 'rank-00000.bin' (written by rank 0)")


def test_truncated_shard_file(ckpt):
    with open(ckpt / "rank-00000.bin", "r+b") as f:
        f.truncate(10)
    assert load_error(ckpt, RuntimeError).startswith(
        f"oneflow.load: '{ckpt}': shard file 'rank-00000.bin' has 10 bytes, the metadata expects ")


def test_shape_mismatch_with_the_model(ckpt):
    state = flow.load(ckpt)
    model = make(0)
    model.fc1 = flow.nn.Linear(6, 11)
    with pytest.raises(RuntimeError) as info:
        model.load_state_dict(state)
    assert str(info.value) == (
        "MLP.load_state_dict: size mismatch for fc1.weight: checkpoint has shape (10, 6), model "
        "has shape (11, 6); size mismatch for fc1.bias: checkpoint has shape (10,), model has "
        "shape (11,)")


def test_other_format_version(ckpt):
    assert load_error(ckpt, RuntimeError, lambda m: m.update(version=2)) == (
        f"oneflow.load: '{ckpt}' is a sharded checkpoint of format version 2; this oneflow reads "
        f"version 1")


def test_other_format(ckpt):
    assert load_error(ckpt, RuntimeError, lambda m: m.update(format="something else")) == (
        f"oneflow.load: '{ckpt}': metadata.json is not the metadata of a oneflow sharded "
        f"checkpoint (format 'something else', expected 'oneflow-sharded-checkpoint')")
    (ckpt / "metadata.json").write_text("{not json")
    assert load_error(ckpt, RuntimeError).startswith(
        f"oneflow.load: '{ckpt}': metadata.json is not valid JSON (")


def test_directory_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    assert load_error(tmp_path, IsADirectoryError) == (
        f"oneflow.load: '{tmp_path}' is a directory but not a sharded checkpoint (no "
        f"metadata.json); expected a file written by oneflow.save or a directory written by "
        f"oneflow.save(..., sharded=True)")


def test_metadata_that_does_not_add_up(ckpt):
    def box_outside(m):
        m["tensors"][0]["shards"][0]["box"] = [[0, 99]]

    def bytes_outside(m):
        m["tensors"][0]["shards"][0]["offset"] = 10 ** 9

    def hole(m):
        m["tensors"][2]["shards"] = []

    def file_outside(m):
        m["files"] = {"../../etc/passwd.bin": 3}

    prefix = f"oneflow.load: '{ckpt}': metadata.json "
    original = (ckpt / "metadata.json").read_text()

    def broken(edit):
        (ckpt / "metadata.json").write_text(original)
        return load_error(ckpt, RuntimeError, edit)

    assert broken(box_outside) == (
        prefix + "is inconsistent: tensor 0 has a shard box [[0, 99]] outside its shape (5,)")
    assert broken(bytes_outside) == (
        prefix + "is inconsistent: tensor 0 has a shard at bytes 1000000000+20 that its file "
        "does not hold")
    assert broken(hole) == (
        prefix + "is inconsistent: tensor 2 has shards covering 0 elements of shape (10, 6)")
    assert broken(file_outside) == (
        prefix + "names a shard file '../../etc/passwd.bin' outside the checkpoint")


def test_save_refuses_to_replace_what_is_not_a_checkpoint(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("precious")
    with pytest.raises(FileExistsError) as info:
        flow.save(make(0).state_dict(), tmp_path / "data", sharded=True)
    assert str(info.value) == (
        f"oneflow.save(sharded=True): '{tmp_path / 'data'}' exists and is not a sharded "
        f"checkpoint; refusing to replace it (remove it or choose another name)")
    assert (tmp_path / "data" / "keep.txt").read_text() == "precious"


def test_save_option_errors(tmp_path):
    with pytest.raises(ValueError) as info:
        flow.save({}, tmp_path / "c", sharded=True, torch_format=True)
    assert str(info.value) == (
        "oneflow.save: sharded=True writes every rank's own shards; it takes neither "
        "torch_format=True nor global_dst_rank (got torch_format=True, global_dst_rank=None)")
    with pytest.raises(TypeError) as info:
        flow.save({"f": print}, tmp_path / "c", sharded=True)
    assert str(info.value) == (
        "oneflow.save(sharded=True): cannot store the object['f'] of type "
        "builtin_function_or_method; a sharded checkpoint holds tensors, numbers, strings, "
        "dtypes, devices and dicts, lists and tuples of them")
    assert not os.path.exists(tmp_path / "c")
    with pytest.raises(FileNotFoundError) as info:
        flow.save({}, tmp_path / "no" / "c", sharded=True)
    assert str(info.value) == (f"oneflow.save(sharded=True): cannot write '{tmp_path}/no/c': "
                               f"directory '{tmp_path}/no' does not exist")


def test_load_option_errors(ckpt):
    with pytest.raises(ValueError) as info:
        flow.load(ckpt, global_src_rank=0)
    assert str(info.value) == (
        f"oneflow.load: '{ckpt}' is a directory (a sharded checkpoint), which every rank reads "
        f"its own part of; global_src_rank=0 is only for single files")
