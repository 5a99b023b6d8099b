"""What runs inside a DataLoader worker process, and get_worker_info().

    def worker_init_fn(worker_id):
        info = get_worker_info()      # id, num_workers, seed, dataset (this worker's copy)
        ...

A worker receives (epoch, task, indices) on its own queue, loads and collates that batch, and
puts (epoch, task, batch) on the shared result queue; None on its queue ends it. Before
anything else it seeds oneflow's, Python's and numpy's generators with base_seed + worker id
(PyTorch's rule: random transforms differ between workers and repeat under flow.manual_seed),
then calls worker_init_fn(worker id).
"""
import os
import queue
import random
import sys
import traceback
from collections import namedtuple

WorkerInfo = namedtuple("WorkerInfo", ["id", "num_workers", "seed", "dataset"])

_worker_info = None  # what oneflow.utils.data.get_worker_info() returns in this process

# How often an idle worker checks that the process that started it is still there.
_PARENT_CHECK_SECONDS = 1.0


class ExceptionInWorker:
    """An exception raised in a worker, carried to the main process as text (the exception
    object itself may not pickle)."""

    def __init__(self, worker_id, task, exc):
        self.worker_id, self.task, self.pid = worker_id, task, os.getpid()
        self.type_name = type(exc).__name__
        self.exc_type = type(exc)
        self.message = str(exc)
        self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def __reduce__(self):
        # The class may not exist in the main process (defined in a __main__ that spawn
        # re-imports differently): keep it only when it is a builtin exception.
        state = dict(self.__dict__)
        if getattr(self.exc_type, "__module__", None) != "builtins":
            state["exc_type"] = None
        return (_rebuild_exception, (state,))

    def reraise(self):
        what = "the worker's start (worker_init_fn or dataset setup)" if self.task is None else f"batch {self.task}"
        message = f"DataLoader worker {self.worker_id} (pid {self.pid}) failed on {what}: {self.type_name}: {self.message}"
        exc_type = self.exc_type if isinstance(self.exc_type, type) else RuntimeError
        try:
            exc = exc_type(message)
        except Exception:  # an exception class with a different constructor
            exc = RuntimeError(message)
        exc.add_note("Traceback in the worker:\n" + self.traceback.rstrip())
        raise exc


def _rebuild_exception(state):
    obj = ExceptionInWorker.__new__(ExceptionInWorker)
    obj.__dict__.update(state)
    return obj


class IterableEnd:
    """A worker's IterableDataset copy is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


def _seed_all(seed):
    import oneflow as flow

    flow.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2 ** 32))


def worker_loop(dataset, index_queue, result_queue, kind, collate_fn, batch_size, drop_last,
                base_seed, init_fn, worker_id, num_workers, parent_pid):
    """kind: "map" (tasks carry a list of indices, or one index without batching) or
    "iterable" (tasks ask for the next batch of this worker's own iterator)."""
    global _worker_info
    seed = base_seed + worker_id
    init_error, stream = None, None
    try:
        _seed_all(seed)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        if init_fn is not None:
            init_fn(worker_id)
    except Exception as e:  # reported with the first task instead of killing the worker silently
        init_error = ExceptionInWorker(worker_id, None, e)

    def next_batch():
        nonlocal stream
        if stream is None:
            stream = iter(dataset)
        if batch_size is None:
            return collate_fn(next(stream))
        batch = []
        for sample in stream:
            batch.append(sample)
            if len(batch) == batch_size:
                return collate_fn(batch)
        if batch and not drop_last:
            return collate_fn(batch)
        raise StopIteration

    while True:
        try:
            task = index_queue.get(timeout=_PARENT_CHECK_SECONDS)
        except queue.Empty:
            if os.getppid() != parent_pid:  # the main process died: nobody will read
                break
            continue
        if task is None:
            break
        if task == "reset":  # a new epoch of persistent workers: iterate the dataset again
            stream = None
            continue
        epoch, task_id, indices = task
        if init_error is not None:  # reported instead of this task's batch
            data, init_error = init_error, None
        else:
            try:
                if kind == "iterable":
                    data = next_batch()
                elif isinstance(indices, list):
                    data = collate_fn([dataset[i] for i in indices])
                else:
                    data = collate_fn(dataset[indices])
            except StopIteration:
                data = IterableEnd(worker_id)
            except Exception as e:
                data = ExceptionInWorker(worker_id, task_id, e)
        try:
            result_queue.put((epoch, task_id, data))
        except Exception as e:  # the batch does not pickle
            result_queue.put((epoch, task_id, ExceptionInWorker(worker_id, task_id, e)))
    # The main process may have stopped reading: do not block the exit on unsent batches.
    result_queue.cancel_join_thread()
