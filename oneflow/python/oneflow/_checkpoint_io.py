"""Helpers that the checkpoint formats share (serialization, _sharded_checkpoint, _torch_format,
utils.safetensors): a tensor's whole bytes, where a loaded tensor goes, atomic writes. A leaf: it
imports none of those modules.

    _write_atomically("model.pt", lambda f: f.write(data))   # all of data or the old file
    t = _place(cpu_tensor, "cuda:0", map_location="cpu")
"""

import os

import oneflow as flow


def _whole_bytes(t):
    """The raw bytes of the whole tensor t, on the host. A global tensor is gathered (a
    collective: every rank of its placement must call this)."""
    data = t.detach()
    if data.is_global:
        data = data.to_global(sbp=[flow.sbp.broadcast] * len(data.sbp)).to_local()
    if str(data._device) != "cpu":
        data = data.to("cpu")
    return data._raw_bytes()


def _place(t, saved_device, map_location):
    """t (read on the cpu) where map_location puts a tensor saved on saved_device."""
    target = _map_device(saved_device, map_location)
    if target is not None and str(target) != "cpu":
        t = t.to(target)
    if callable(map_location):
        t = map_location(t, saved_device)
    return t


def _map_device(saved_device, map_location):
    """The device a tensor saved on saved_device is loaded onto (None: leave it on cpu)."""
    if map_location is None:
        return saved_device
    if isinstance(map_location, dict):
        return map_location.get(saved_device, saved_device)
    if callable(map_location):
        return None  # the callable receives the cpu tensor and moves it itself
    return map_location


def _write_atomically(path, write):
    if hasattr(path, "write"):  # an open file or io.BytesIO
        write(path)
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"oneflow.save: cannot write '{path}': directory '{directory}' does not exist"
        )
    # A unique temporary name in the same directory, so os.replace is a rename on one file
    # system. os.open with mode 0o666 lets the umask decide the permissions, as open() would.
    tmp_path = os.path.join(
        directory, f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    )
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)


def _fsync_directory(directory):
    # Makes the rename itself durable; not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
