"""SummaryWriter: scalars, histograms, text and an nn.Graph's plan as TensorBoard event files, with the names of
torch.utils.tensorboard.SummaryWriter; no TensorFlow or tensorboard needed to write them.

    writer = SummaryWriter("runs/gpt")
    writer.add_scalar("loss", loss.item(), step)
    writer.close()
    # tensorboard --logdir runs

Each writer appends to one file, ``events.out.tfevents.<time>.<host>.<pid>.<n>``, of TFRecord
frames (_record.py) around Event messages (_proto.py). add_scalars writes each of its curves
into a subfolder of the log dir, as PyTorch does, so TensorBoard draws them in one chart.
"""
import os
import socket
import time

from oneflow.utils.tensorboard import _graph, _proto
from oneflow.utils.tensorboard._record import frame

_file_count = 0


def _number(value, what):
    if hasattr(value, "item"):
        if hasattr(value, "numel") and value.numel() != 1:
            raise ValueError(f"{what}: expected a number or a one-element tensor, got a tensor "
                             f"of shape {tuple(value.shape)}")
        value = value.item()
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: expected a number, got {type(value).__name__}") from None


def _array(values, what):
    import numpy as np

    if hasattr(values, "numpy"):
        values = values.detach().numpy() if hasattr(values, "detach") else values.numpy()
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.size == 0:
        raise ValueError(f"{what}: the values are empty")
    if not np.isfinite(a).all():
        raise ValueError(f"{what}: the values contain inf or NaN")
    return a


def _tensorflow_edges():
    """TensorFlow's default histogram buckets (PyTorch's bins='tensorflow'): limits growing by
    10% from 1e-12 to 1e20, mirrored for negatives, around 0."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(float("inf"))
    return [-x for x in reversed(pos)] + [0.0] + pos


def _step(global_step, what):
    if global_step is None:
        return 0
    if hasattr(global_step, "item"):
        global_step = global_step.item()
    if isinstance(global_step, bool) or not isinstance(global_step, int) and not (
            isinstance(global_step, float) and global_step.is_integer()):
        raise TypeError(f"{what}: global_step must be an integer, got {global_step!r}")
    return int(global_step)


class _EventFile:
    def __init__(self, log_dir, filename_suffix=""):
        global _file_count
        os.makedirs(log_dir, exist_ok=True)
        _file_count += 1
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{_file_count}{filename_suffix}")
        self.path = os.path.join(log_dir, name)
        self._f = open(self.path, "ab")
        self.write(_proto.event(time.time(), 0, file_version="brain.Event:2"))
        self.flush()

    def write(self, event):
        self._f.write(frame(event))

    def flush(self):
        self._f.flush()

    def close(self):
        if not self._f.closed:
            self._f.close()


class SummaryWriter:
    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if purge_step is not None:
            raise ValueError("SummaryWriter: purge_step is not supported (events are only "
                             "appended); leave it None")
        if log_dir is None:
            stamp = time.strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        if not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"SummaryWriter: max_queue must be a positive integer, got {max_queue!r}")
        self.log_dir = str(log_dir)
        self._suffix = filename_suffix
        self._max_queue = max_queue
        self._flush_secs = flush_secs
        self._file = _EventFile(self.log_dir, filename_suffix)
        self._pending = 0
        self._last_flush = time.monotonic()
        self._scalar_files = {}  # add_scalars: one file per curve, in a subfolder
        self._closed = False

    def get_logdir(self):
        return self.log_dir

    def _write(self, value, global_step, walltime, file=None):
        if self._closed:
            raise RuntimeError("SummaryWriter: the writer was closed")
        wall = time.time() if walltime is None else float(walltime)
        (file or self._file).write(_proto.event(wall, global_step, summary=_proto.summary([value])))
        self._pending += 1
        if self._pending >= self._max_queue or time.monotonic() - self._last_flush >= self._flush_secs:
            self.flush()

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        if new_style or double_precision:
            raise ValueError("SummaryWriter.add_scalar: new_style and double_precision are not "
                             "supported (scalars are written as simple_value floats)")
        x = _number(scalar_value, f"SummaryWriter.add_scalar('{tag}')")
        self._write(_proto.scalar_value(tag, x), _step(global_step, "add_scalar"), walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError(f"SummaryWriter.add_scalars: tag_scalar_dict must be a dict, got "
                            f"{type(tag_scalar_dict).__name__}")
        step = _step(global_step, "add_scalars")
        for tag, value in tag_scalar_dict.items():
            x = _number(value, f"SummaryWriter.add_scalars('{main_tag}', '{tag}')")
            folder = os.path.join(self.log_dir, f"{main_tag}_{tag}".replace("/", "_"))
            if folder not in self._scalar_files:
                self._scalar_files[folder] = _EventFile(folder, self._suffix)
            self._write(_proto.scalar_value(main_tag, x), step, walltime,
                        self._scalar_files[folder])

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        import numpy as np

        what = f"SummaryWriter.add_histogram('{tag}')"
        a = _array(values, what)
        if isinstance(bins, str) and bins == "tensorflow":
            edges = np.array(_tensorflow_edges())
        elif isinstance(bins, (int, str)) and not isinstance(bins, bool):
            try:
                edges = np.histogram_bin_edges(a, bins=bins)
            except ValueError as e:
                raise ValueError(f"{what}: bins={bins!r}: {e}") from None
        else:
            raise TypeError(f"{what}: bins must be 'tensorflow', a numpy bin rule or an int, got "
                            f"{bins!r}")
        counts, edges = np.histogram(a, bins=edges)
        if max_bins is not None and len(counts) > max_bins:
            raise ValueError(f"{what}: {len(counts)} bins exceed max_bins={max_bins}")
        nz = np.nonzero(counts)[0]  # PyTorch drops the empty buckets at both ends
        first, last = (int(nz[0]), int(nz[-1]) + 1) if nz.size else (0, 0)
        limits = edges[1:][first:last]
        counts = counts[first:last]
        value = _proto.histogram_value(tag, a.min(), a.max(), a.size, a.sum(), float(np.dot(a, a)),
                                       limits, counts)
        self._write(value, _step(global_step, "add_histogram"), walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        if not isinstance(text_string, str):
            raise TypeError(f"SummaryWriter.add_text('{tag}'): text_string must be a str, got "
                            f"{type(text_string).__name__}")
        self._write(_proto.text_value(f"{tag}/text_summary", text_string),
                    _step(global_step, "add_text"), walltime)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """The plan of an nn.Graph as TensorBoard's graph: one node per step (forward, backward
        and optimizer updates), in boxes named after the modules that ran them. With
        input_to_model (a tensor or a tuple of them) the graph is called on it first, as
        PyTorch's add_graph runs the model once; otherwise the graph must have run already.
        The plan written is the one compiled last."""
        what = "SummaryWriter.add_graph"
        if not hasattr(model, "_compiled") or not hasattr(model, "build"):
            raise TypeError(f"{what}: expected an nn.Graph, got {type(model).__name__} (wrap a "
                            f"Module in an nn.Graph to write its graph)")
        if not use_strict_trace:
            raise ValueError(f"{what}: use_strict_trace=False is not supported (a graph's plan "
                             f"is traced one way); leave it True")
        if input_to_model is not None:
            args = input_to_model if isinstance(input_to_model, tuple) else (input_to_model,)
            model(*args)
        if not model._compiled:
            raise ValueError(f"{what}: the graph has not run yet; call it once or pass "
                             f"input_to_model")
        description = model._compiled[-1].plan.describe()
        if verbose:
            print(description)
        if self._closed:
            raise RuntimeError("SummaryWriter: the writer was closed")
        self._file.write(_proto.event(time.time(), 0, graph_def=_graph.graph_def(description)))
        self.flush()

    def flush(self):
        if self._closed:
            return
        self._file.flush()
        for f in self._scalar_files.values():
            f.flush()
        self._pending = 0
        self._last_flush = time.monotonic()

    def close(self):
        if self._closed:
            return
        self.flush()
        self._file.close()
        for f in self._scalar_files.values():
            f.close()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
