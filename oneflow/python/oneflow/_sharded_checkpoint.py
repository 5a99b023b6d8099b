"""Sharded checkpoints: oneflow.save(obj, dir, sharded=True) and oneflow.load(dir).

    flow.save(model.state_dict(), "ckpt", sharded=True)     # every rank calls it
    model.load_state_dict(flow.load("ckpt"))                  # any layout, any world size

A sharded checkpoint is a directory:

    ckpt/metadata.json         format name and version, the object's structure, and for every
                               tensor its dtype, logical shape, placement, NdSbp and shards
    ckpt/rank-00000.bin ...    one file per rank that holds shards: raw little-endian bytes of
                               its shards, one after the other (C order, no header)

Each shard entry of the metadata names its file, byte offset and size, and the logical box it
holds ([begin, end) per dimension). Nothing in the directory is executable: loading parses JSON
and copies bytes, so the format is as safe as safetensors.

Saving (a collective: every rank of the job calls save with the same structure, in SPMD style):
- each rank writes only the shards of global tensors that it holds; a box held by several ranks
  (broadcast, or the broadcast axis of a 2-D NdSbp) is written once, by the lowest such rank;
- partial-sum tensors are reduced first (each partial_sum entry of the NdSbp becomes broadcast,
  splits stay), so a file holds values, never addends; this reduction is a collective over the
  tensor's placement, which SPMD code reaches on every rank in the same order;
- local tensors (not global) are written by rank 0 alone: in SPMD code they are replicas;
- the files go to a temporary directory next to the target ('.NAME.saving-TOKEN'), each file is
  fsynced, rank 0 writes metadata.json last and then swaps the directory into place with one
  atomic rename (renameat2 RENAME_EXCHANGE when the target exists). A save that dies half-way
  leaves the previous checkpoint as it was; the next save removes the stale temporary directory.
  The ranks must share the file system that holds the directory.

Loading:
- in a single process, load returns local tensors holding the whole values;
- in a job of several ranks, load returns LazyTensor placeholders (shape and dtype known, no data
  read yet). Module.load_state_dict and Optimizer.load_state_dict materialise each one like the
  tensor it is loaded into: for a global parameter, every rank reads only the byte ranges of the
  shard files that overlap the box it holds under the parameter's placement and NdSbp, whatever
  layout and world size saved them; for a local parameter, the whole value. `lazy.numpy()` and
  `lazy.materialize()` give the whole value anywhere.
"""

import collections
import ctypes
import json
import os
import shutil
import sys

import oneflow as flow
from oneflow._checkpoint_io import _fsync_directory, _place
from oneflow._dtype_util import dtype_by_name, dtype_name
from oneflow._parameter import Parameter

FORMAT = "oneflow-sharded-checkpoint"
VERSION = 1
METADATA = "metadata.json"

_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int32": 4, "int64": 8, "float16": 2,
             "bfloat16": 2, "float32": 4, "float64": 8}
_SPLIT, _BROADCAST, _PARTIAL = 0, 1, 2  # an Sbp's kind in its pickled state (kind, axis)

# Bytes this process read from shard files (tests check that a rank reads only its part).
bytes_read = [0]


def _file_name(rank):
    return f"rank-{rank:05d}.bin"


# ---- which logical box each rank holds (sbp/sbp.cc: SplitRange, LocalRanges) ----

def _split_range(length, parts, k):
    base, extra = divmod(length, parts)
    begin = k * base + min(k, extra)
    return begin, begin + base + (1 if k < extra else 0)


def _coord(index, hierarchy):
    """Row-major coordinate of the index-th rank (ranks sorted) in the hierarchy."""
    coord = []
    for n in reversed(hierarchy):
        coord.append(index % n)
        index //= n
    return coord[::-1]


def _box(shape, hierarchy, pairs, index):
    """[[begin, end], ...] of the logical tensor that the index-th rank of the placement holds."""
    box = [[0, n] for n in shape]
    for d, c in enumerate(_coord(index, hierarchy)):
        kind, axis = pairs[d]
        if kind == _SPLIT:
            b, e = box[axis]
            sb, se = _split_range(e - b, hierarchy[d], c)
            box[axis] = [b + sb, b + se]
    return box


def _volume(box):
    v = 1
    for b, e in box:
        v *= max(0, e - b)
    return v


def _intersect(a, b):
    out = [[max(a0, b0), min(a1, b1)] for (a0, a1), (b0, b1) in zip(a, b)]
    return out if all(e > s for s, e in out) or not out else None


def _sbp_text(pair):
    kind, axis = pair
    return f"S({axis})" if kind == _SPLIT else ("B" if kind == _BROADCAST else "P")


# ---- the object's structure as JSON ----

def _encode(obj, tensors, ids, where):
    """obj with every tensor replaced by {"$": "tensor", "id": i}; tensors collects them (one
    entry for a tensor met twice, so tied weights stay tied)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, flow.Tensor):
        key = id(obj)
        if key not in ids:
            ids[key] = len(tensors)
            tensors.append(obj)
        return {"$": "tensor", "id": ids[key]}
    if isinstance(obj, dict):
        kind = "odict" if isinstance(obj, collections.OrderedDict) else "dict"
        items = []
        for k, v in obj.items():
            if k is not None and not isinstance(k, (bool, int, float, str)):
                raise TypeError(f"oneflow.save(sharded=True): {where} has a key of type "
                                f"{type(k).__name__}; keys must be strings or numbers")
            items.append([k, _encode(v, tensors, ids, f"{where}[{k!r}]")])
        return {"$": kind, "items": items}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"$": kind, "items": [_encode(v, tensors, ids, f"{where}[{i}]")
                                     for i, v in enumerate(obj)]}
    if isinstance(obj, flow.dtype):
        return {"$": "dtype", "name": dtype_name(obj)}
    if isinstance(obj, flow.device):
        return {"$": "device", "name": str(obj)}
    raise TypeError(f"oneflow.save(sharded=True): cannot store {where} of type "
                    f"{type(obj).__name__}; a sharded checkpoint holds tensors, numbers, strings, "
                    f"dtypes, devices and dicts, lists and tuples of them")


def _decode(node, tensors, what):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if not isinstance(node, dict) or "$" not in node:
        raise RuntimeError(f"{what}: metadata.json holds an object that is not of this format")
    kind = node["$"]
    if kind == "tensor":
        return tensors[node["id"]]
    if kind in ("dict", "odict"):
        made = collections.OrderedDict() if kind == "odict" else {}
        for k, v in node["items"]:
            made[k] = _decode(v, tensors, what)
        return made
    if kind == "list":
        return [_decode(v, tensors, what) for v in node["items"]]
    if kind == "tuple":
        return tuple(_decode(v, tensors, what) for v in node["items"])
    if kind == "dtype":
        return dtype_by_name(node["name"])
    if kind == "device":
        return flow.device(node["name"])
    raise RuntimeError(f"{what}: metadata.json holds an entry of unknown kind {str(kind)[:40]!r}")


# ---- saving ----

def _sbp_values(pairs):
    return [flow.sbp.split(a) if k == _SPLIT else flow.sbp.broadcast if k == _BROADCAST else
            flow.sbp.partial_sum for k, a in pairs]


def _without_partial(pairs):
    return [(_BROADCAST, -1) if k == _PARTIAL else (k, a) for k, a in pairs]


def _plan(tensors, world):
    """Per tensor: (record for the metadata, the tensor to take this rank's bytes from). Every
    rank computes the same plan from metadata alone; partial sums are reduced here (collective)."""
    records, sources = [], []
    for t in tensors:
        rec = {"dtype": dtype_name(t.dtype), "shape": list(t.shape),
               "requires_grad": bool(t.requires_grad), "is_parameter": isinstance(t, Parameter)}
        shape = list(t.shape)
        if t.is_global:
            placement, nd_sbp = flow._oneflow_internal.global_info(t)
            device, ranks, hierarchy = placement.__getstate__()
            pairs = [tuple(s.__getstate__()) for s in nd_sbp]
            rec["device"] = device
            rec["placement"] = {"type": device, "ranks": list(ranks),
                                "hierarchy": list(hierarchy)}
            rec["sbp"] = [_sbp_text(p) for p in pairs]
            src = t.detach()
            if any(k == _PARTIAL for k, _ in pairs):
                pairs = _without_partial(pairs)
                src = src.to_global(sbp=_sbp_values(pairs))
            rec["stored_sbp"] = [_sbp_text(p) for p in pairs]
            writers = {}  # box -> lowest rank holding it
            for i, r in enumerate(sorted(ranks)):
                box = _box(shape, list(hierarchy), pairs, i)
                if _volume(box) == 0 and shape:
                    continue
                writers.setdefault(json.dumps(box), (r, box))
            rec["shards"] = [{"rank": r, "box": box} for r, box in writers.values()]
        else:
            rec["device"] = str(t.device)
            rec["placement"] = None
            src = t.detach()
            rec["shards"] = [{"rank": 0, "box": [[0, n] for n in shape]}]
        records.append(rec)
        sources.append(src)
    # Offsets: each rank's file holds its shards in tensor order.
    sizes = [0] * world
    for rec in records:
        item = _ITEMSIZE[rec["dtype"]]
        for s in rec["shards"]:
            r = s["rank"]
            s["file"] = _file_name(r)
            s["offset"] = sizes[r]
            s["nbytes"] = _volume(s["box"]) * item
            sizes[r] += s["nbytes"]
    files = {_file_name(r): n for r, n in enumerate(sizes) if any(
        s["rank"] == r for rec in records for s in rec["shards"])}
    return records, sources, files


def _shard_bytes(src, shard):
    """This rank's shard of src as a buffer over the tensor's own memory (no copy of a CPU
    shard): a memoryview that keeps the tensor alive."""
    local = src.to_local() if src.is_global else src
    if str(local.device) != "cpu":
        local = local.to("cpu")
    if not local.is_contiguous():
        local = local.contiguous()
    nbytes = local.numel() * local.element_size()
    if nbytes != shard["nbytes"]:
        raise RuntimeError(
            f"oneflow.save(sharded=True): this rank holds {nbytes} bytes of a tensor of shape "
            f"{tuple(src.shape)} but its box {shard['box']} needs {shard['nbytes']}")
    if nbytes == 0:
        return b""
    buf = (ctypes.c_char * nbytes).from_address(local.data_ptr())
    buf.tensor = local  # the memory lives while the view does
    return memoryview(buf).cast("B")


def _write_shard(f, data):
    """Appends one shard to this rank's open file (a seam for tests that kill a save)."""
    f.write(data)


def _token(world):
    """A random number, the same on every rank (rank 0's)."""
    value = int.from_bytes(os.urandom(7), "little")
    if world == 1:
        return value
    t = flow.tensor([value], dtype=flow.int64)
    flow.comm.broadcast(t, 0)
    return int(t.item())


def _is_checkpoint_dir(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, METADATA))


def save(obj, path):
    if hasattr(path, "write"):
        raise TypeError("oneflow.save(sharded=True): path must be a directory name, got a file "
                        "object")
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"oneflow.save(sharded=True): cannot write '{path}': directory "
                                f"'{parent}' does not exist")
    if os.path.lexists(path) and not _is_checkpoint_dir(path):
        raise FileExistsError(
            f"oneflow.save(sharded=True): '{path}' exists and is not a sharded checkpoint; "
            f"refusing to replace it (remove it or choose another name)")
    if sys.byteorder != "little":
        raise NotImplementedError("oneflow.save(sharded=True): big-endian hosts are not supported")
    world, rank = flow.env.get_world_size(), flow.env.get_rank()
    tensors = []
    structure = _encode(obj, tensors, {}, "the object")
    records, sources, files = _plan(tensors, world)
    meta = {"format": FORMAT, "version": VERSION, "byte_order": "little", "world_size": world,
            "files": files, "tensors": records, "object": structure}
    text = json.dumps(meta)
    tmp = os.path.join(parent, f".{name}.saving-{_token(world):014x}")
    if rank == 0:
        prefix = f".{name}.saving-"
        for stale in os.listdir(parent):  # left by a save that died
            if stale.startswith(prefix):
                shutil.rmtree(os.path.join(parent, stale), ignore_errors=True)
        os.mkdir(tmp)
    _barrier(world)
    mine = [(src, s) for rec, src in zip(records, sources) for s in rec["shards"]
            if s["rank"] == rank]
    if mine:
        with open(os.path.join(tmp, _file_name(rank)), "wb") as f:
            for src, shard in mine:
                _write_shard(f, _shard_bytes(src, shard))
            f.flush()
            os.fsync(f.fileno())
    _barrier(world)
    if rank == 0:
        with open(os.path.join(tmp, METADATA), "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        _fsync_directory(tmp)
        if os.path.lexists(path):
            if _exchange(tmp, path):
                shutil.rmtree(tmp)  # the previous checkpoint, now under the temporary name
            else:  # no renameat2: two renames, the old one removed only after the new is in
                old = tmp + ".old"
                os.rename(path, old)
                os.rename(tmp, path)
                shutil.rmtree(old)
        else:
            os.rename(tmp, path)
        _fsync_directory(parent)
    _barrier(world)


def _barrier(world):
    if world > 1:
        flow.comm.barrier()


def _exchange(a, b):
    """Atomically swaps two directory entries (Linux renameat2 RENAME_EXCHANGE); False where the
    system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


# ---- loading ----

class LazyTensor:
    """A tensor of a sharded checkpoint, not read yet. load_state_dict materialises it like the
    tensor it is loaded into; materialize() / numpy() give the whole value."""

    _is_lazy_checkpoint_tensor = True

    def __init__(self, reader, index):
        self._reader, self._index = reader, index
        rec = reader.records[index]
        self.dtype = dtype_by_name(rec["dtype"])
        self.shape = flow.Size(rec["shape"])
        self.saved_device = rec["device"]

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        return _volume([[0, n] for n in self.shape])

    def __repr__(self):
        rec = self._reader.records[self._index]
        where = (f"placement={rec['placement']['ranks']}, sbp={rec['sbp']}" if rec["placement"]
                 else f"device={rec['device']}")
        return (f"LazyTensor(shape={tuple(self.shape)}, dtype={rec['dtype']}, saved with "
                f"{where}, from '{self._reader.path}')")

    def materialize(self, device="cpu"):
        """The whole value as a local tensor on device."""
        t = self._reader.read_whole(self._index)
        return t if str(device) == "cpu" else t.to(device)

    def numpy(self):
        return self.materialize().numpy()

    def _materialize_like(self, like):
        """The value laid out like `like`: a global tensor with like's placement and NdSbp, or a
        local tensor on like's device. Each rank reads only byte ranges of its box; where like is
        broadcast (or partial) along a hierarchy dimension, the ranks along it read disjoint
        parts and gather them (boxing), so every byte of the checkpoint is read once in the job;
        a 1-D broadcast gathers in rounds, so a rank holds the whole and a sixteenth of it."""
        if not like.is_global:
            return self.materialize(like.device)
        placement, nd_sbp = flow._oneflow_internal.global_info(like)
        device, ranks, hierarchy = placement.__getstate__()
        pairs = [tuple(s.__getstate__()) for s in nd_sbp]
        shape, hierarchy = list(self.shape), list(hierarchy)
        if shape != list(like.shape):  # e.g. a scalar state: whole on every rank
            pairs = [(_BROADCAST, -1)] * len(hierarchy)
        stored = _without_partial(pairs)
        read = _read_layout(shape, hierarchy, stored)
        ranks = sorted(ranks)
        rank = flow.env.get_rank()
        to_global = flow._oneflow_internal.to_global
        if rank in ranks and len(hierarchy) == 1 and read != stored:
            local = self._gather_rows(placement, len(ranks), ranks.index(rank))
            g = to_global(local, placement, _sbp_values(stored), False, shape)
        else:
            if rank in ranks:
                box = _box(shape, hierarchy, read, ranks.index(rank))
                local = self._reader.read_box(self._index, box)
            else:
                local = flow.empty(*([0] * len(shape)), dtype=self.dtype)
            g = to_global(local, placement, _sbp_values(read), False, shape)
        if read != pairs:
            g = g.to_global(sbp=_sbp_values(pairs))
        return g

    def _gather_rows(self, placement, n, index):
        """The whole value on each of the n ranks of a 1-D placement (this one the index-th):
        in rounds over axis 0, each rank reads its part of the round's rows and the ranks
        all-gather them into the result."""
        shape = list(self.shape)
        whole = self.numel() * _ITEMSIZE[self._reader.records[self._index]["dtype"]]
        budget = max(64 << 10, whole // 16)
        k = max(1, min(shape[0], -(-whole // budget)))
        out = flow.empty(*shape, dtype=self.dtype)
        to_global = flow._oneflow_internal.to_global
        for r in range(k):
            b, e = shape[0] * r // k, shape[0] * (r + 1) // k
            sb, se = _split_range(e - b, n, index)
            piece = self._reader.read_box(self._index, [[b + sb, b + se]] +
                                          [[0, m] for m in shape[1:]])
            g = to_global(piece, placement, [flow.sbp.split(0)], False, [e - b] + shape[1:])
            out[b:e] = g.to_global(sbp=[flow.sbp.broadcast]).to_local()
        return out


def _read_layout(shape, hierarchy, pairs):
    """pairs with each broadcast dimension split instead, along the axis whose parts are then
    longest (a 0-dim tensor stays broadcast): the layout in which the ranks read disjoint boxes
    of a tensor to be laid out as pairs."""
    if not shape:
        return pairs
    parts = [1] * len(shape)
    for d, (kind, axis) in enumerate(pairs):
        if kind == _SPLIT:
            parts[axis] *= hierarchy[d]
    out = list(pairs)
    for d, (kind, _) in enumerate(pairs):
        if kind == _BROADCAST:
            a = max(range(len(shape)), key=lambda i: (shape[i] // parts[i], -i))
            if shape[a] // parts[a] == 0:
                continue  # too small to split: every rank reads it
            out[d] = (_SPLIT, a)
            parts[a] *= hierarchy[d]
    return out


def materialize_like(value, like):
    """value itself, or a LazyTensor materialised like the tensor `like` (for load_state_dict)."""
    if getattr(value, "_is_lazy_checkpoint_tensor", False):
        return value._materialize_like(like)
    return value


def _record_problem(rec, files):
    """What is wrong with one tensor's record (None when nothing): boxes inside the shape, byte
    ranges inside their files, the shards covering the tensor."""
    if rec["dtype"] not in _ITEMSIZE:
        return f"has dtype {str(rec['dtype'])[:20]!r}"
    shape = [int(n) for n in rec["shape"]]
    item = _ITEMSIZE[rec["dtype"]]
    covered = 0
    for s in rec["shards"]:
        box = s["box"]
        if len(box) != len(shape) or any(not 0 <= b <= e <= n for (b, e), n in zip(box, shape)):
            return f"has a shard box {box} outside its shape {tuple(shape)}"
        if s["file"] not in files or s["nbytes"] != _volume(box) * item or s["offset"] < 0 or \
                s["offset"] + s["nbytes"] > files[s["file"]]:
            return f"has a shard at bytes {s['offset']}+{s['nbytes']} that its file does not hold"
        covered += _volume(box)
    if covered != _volume([[0, n] for n in shape]):
        return f"has shards covering {covered} elements of shape {tuple(shape)}"
    return None


class _Reader:
    def __init__(self, path):
        self.path = path
        what = f"oneflow.load: '{path}'"
        meta_path = os.path.join(path, METADATA)
        if not os.path.isfile(meta_path):
            raise IsADirectoryError(
                f"{what} is a directory but not a sharded checkpoint (no {METADATA}); expected a "
                f"file written by oneflow.save or a directory written by "
                f"oneflow.save(..., sharded=True)")
        try:
            with open(meta_path, "rb") as f:
                meta = json.loads(f.read().decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as ex:
            raise RuntimeError(f"{what}: {METADATA} is not valid JSON ({ex})") from None
        fmt = meta.get("format") if isinstance(meta, dict) else None
        if fmt != FORMAT:
            raise RuntimeError(f"{what}: {METADATA} is not the metadata of a oneflow sharded "
                               f"checkpoint (format {str(fmt)[:40]!r}, expected {FORMAT!r})")
        version = meta.get("version")
        if version != VERSION:
            raise RuntimeError(f"{what} is a sharded checkpoint of format version {version!r}; "
                               f"this oneflow reads version {VERSION}")
        if meta.get("byte_order") != "little" or sys.byteorder != "little":
            raise NotImplementedError(f"{what}: only little-endian checkpoints on little-endian "
                                      f"hosts are supported")
        self.what = what
        try:
            files = dict(meta["files"])
            self.records = list(meta["tensors"])
            meta["object"]
        except (KeyError, TypeError, ValueError):
            raise RuntimeError(f"{what}: {METADATA} lacks its files, tensors or object") from None
        for name, size in files.items():
            if os.path.basename(name) != name or not name.endswith(".bin"):
                raise RuntimeError(f"{what}: {METADATA} names a shard file {name[:60]!r} outside "
                                   f"the checkpoint")
            full = os.path.join(path, name)
            if not os.path.isfile(full):
                writer = name[len("rank-"):-len(".bin")].lstrip("0") or "0"
                raise FileNotFoundError(f"{what} is missing shard file '{name}' (written by rank "
                                        f"{writer})")
            if os.path.getsize(full) != size:
                raise RuntimeError(f"{what}: shard file '{name}' has {os.path.getsize(full)} "
                                   f"bytes, the metadata expects {size}")
        for i, rec in enumerate(self.records):
            try:
                problem = _record_problem(rec, files)
            except (KeyError, TypeError, ValueError, IndexError) as ex:
                problem = f"malformed ({type(ex).__name__}: {ex})"
            if problem:
                raise RuntimeError(f"{what}: {METADATA} is inconsistent: tensor {i} {problem}")
        self.meta = meta

    def read_box(self, index, box):
        """A local tensor with the elements of box ([[begin, end], ...]) of tensor index, read
        from the byte ranges of the shard files that overlap it straight into the tensor's own
        memory (no staging copy: a rank holds its box once)."""
        rec = self.records[index]
        item = _ITEMSIZE[rec["dtype"]]
        dims = [e - b for b, e in box]
        out = flow.empty(*dims, dtype=dtype_by_name(rec["dtype"])) if dims else \
            flow.empty((), dtype=dtype_by_name(rec["dtype"]))
        nbytes = _volume(box) * item
        if nbytes == 0:
            return out
        view = memoryview((ctypes.c_char * nbytes).from_address(out.data_ptr())).cast("B")
        for shard in rec["shards"]:
            inter = _intersect(shard["box"], box)
            if inter is not None:
                self._read_into(view, box, shard, inter, item)
        return out

    def _read_into(self, view, box, shard, inter, item):
        """Reads the part inter of one shard into view, the bytes of box (C order): one pread
        per run that is contiguous both in the shard file and in box."""
        sbox = shard["box"]

        def strides(b):
            out, acc = [0] * len(b), item
            for d in range(len(b) - 1, -1, -1):
                out[d] = acc
                acc *= b[d][1] - b[d][0]
            return out

        s_strides, d_strides = strides(sbox), strides(box)
        # Trailing dimensions whole in both the shard and box join one run; k: the last one not.
        k = len(inter) - 1
        while k >= 0 and inter[k] == sbox[k] and inter[k] == box[k]:
            k -= 1
        run = item
        for d in range(k + 1, len(inter)):
            run *= inter[d][1] - inter[d][0]
        if k >= 0:
            run *= inter[k][1] - inter[k][0]
        starts = [(shard["offset"], 0)]
        for d in range(k, -1, -1):  # the varying dimensions: k's first element, outer ones all
            idx = [inter[d][0]] if d == k else range(inter[d][0], inter[d][1])
            starts = [(so + (i - sbox[d][0]) * s_strides[d], do + (i - box[d][0]) * d_strides[d])
                      for i in idx for so, do in starts]
        fd = os.open(os.path.join(self.path, shard["file"]), os.O_RDONLY)
        try:
            for so, do in starts:
                got = 0
                while got < run:
                    n = os.preadv(fd, [view[do + got:do + run]], so + got)
                    if n <= 0:
                        raise RuntimeError(f"{self.what}: shard file '{shard['file']}' ended "
                                           f"early")
                    got += n
        finally:
            os.close(fd)
        bytes_read[0] += run * len(starts)

    def read_whole(self, index):
        return self.read_box(index, [[0, n] for n in self.records[index]["shape"]])


def load(path, map_location):
    """The saved object: local tensors holding whole values in a single process, LazyTensor
    placeholders in a job of several ranks."""
    reader = _Reader(path)
    world = flow.env.get_world_size()
    if world > 1:
        if map_location is not None:
            raise NotImplementedError(
                f"oneflow.load: map_location is not supported for a sharded checkpoint in a job "
                f"of {world} ranks ('{path}'): load_state_dict places each tensor like the "
                f"parameter it is loaded into")
        tensors = [LazyTensor(reader, i) for i in range(len(reader.records))]
    else:
        tensors = []
        for i, rec in enumerate(reader.records):
            t = _place(reader.read_whole(i), rec["device"], map_location)
            if rec["is_parameter"]:
                t = Parameter(t, rec["requires_grad"])
            elif rec["requires_grad"]:
                t.requires_grad_(True)
            tensors.append(t)
    return _decode(reader.meta["object"], tensors, reader.what)
