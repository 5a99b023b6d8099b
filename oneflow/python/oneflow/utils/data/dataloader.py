"""DataLoader: batches of samples from a dataset, with PyTorch's arguments.

    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
    for X, y in loader:
        ...

With ``num_workers=0`` batches are loaded in the calling process. With ``num_workers > 0`` that
many worker processes load them (forked, as PyTorch does on Linux; ``multiprocessing_context``
picks another start method): the main process draws the indices from the sampler, hands the
batches out round-robin, keeps ``prefetch_factor`` batches per worker in flight and yields them
in sampler order, so the batches are the same, in the same order, as with ``num_workers=0``.
Each worker seeds oneflow's, Python's and numpy's generators with a base seed + its id, then
calls ``worker_init_fn(worker_id)``; ``get_worker_info()`` tells dataset code which worker it
runs in. The base seed derives from ``flow.initial_seed()`` without drawing from the main
process's generator, so turning workers on changes no other random number. Workers stop at the
end of each epoch unless ``persistent_workers=True``. An exception in a worker is raised in the
main process with the worker's traceback attached; a worker that dies is reported by pid and
exit code. ``pin_memory`` is accepted and has nothing to do on CPU tensors.
"""
import itertools
import os
import sys

import oneflow as flow
from oneflow import _random
from oneflow._profiler_ranges import range_or_none
from oneflow.utils.data.collate import default_collate, default_convert
from oneflow.utils.data.dataset import IterableDataset
from oneflow.utils.data.distributed import DistributedSampler
from oneflow.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler

# How long the main process waits for a batch before checking that the workers are alive.
_LIVENESS_SECONDS = 1.0
_seed_draws = {"seedings": -1, "count": 0}


def _base_seed():
    """The workers' base seed: the n-th iterator since the last flow.manual_seed(s) gets the
    same one in every run, and no number is drawn from the main process's generator (so
    num_workers changes no other random number)."""
    if _seed_draws["seedings"] != _random._seedings:
        _seed_draws.update(seedings=_random._seedings, count=0)
    _seed_draws["count"] += 1
    return hash((flow.initial_seed(), _seed_draws["count"])) & ((1 << 62) - 1)


def get_worker_info():
    """In a DataLoader worker: WorkerInfo(id, num_workers, seed, dataset); in the main process
    None (as PyTorch). An IterableDataset uses it to give each worker its own share."""
    worker = sys.modules.get("oneflow.utils.data._worker")  # imported only where workers run
    return None if worker is None else worker._worker_info


def _is_positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class DataLoader:
    """Iterates over ``dataset`` in batches.

    Args:
        dataset: map-style ``Dataset`` (``__getitem__``/``__len__``) or ``IterableDataset``.
        batch_size: samples per batch, or None to yield single samples unbatched.
        shuffle: a new random order every epoch (from ``flow.randperm``, so
            ``flow.manual_seed`` makes it reproducible).
        sampler: iterable of indices; excludes ``shuffle``.
        batch_sampler: iterable of index lists; excludes ``batch_size``,
            ``shuffle``, ``sampler`` and ``drop_last``.
        num_workers: worker processes that load batches (0: the calling process).
        collate_fn: merges a list of samples into a batch (default: ``default_collate``).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        generator: passed to the ``RandomSampler`` made for ``shuffle=True``.
        timeout: seconds to wait for a batch from the workers (0: no limit).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker.
        multiprocessing_context: start method ("fork", "spawn", "forkserver") or a context.
        prefetch_factor: batches in flight per worker.
        persistent_workers: keep the workers (and their dataset copies) between epochs.
    """

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=False,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        generator=None,
        *,
        prefetch_factor=2,
        persistent_workers=False,
        multiprocessing_context=None,
        pin_memory_device="",
    ):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"DataLoader: drop_last must be a bool, got {drop_last!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers=True needs num_workers > 0, got num_workers=0")
        if num_workers > 0 and not _is_positive_int(prefetch_factor):
            raise ValueError(f"DataLoader: prefetch_factor must be a positive integer, got {prefetch_factor!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
            raise ValueError(f"DataLoader: timeout must be a non-negative number of seconds, got {timeout!r}")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"DataLoader: worker_init_fn must be callable, got {type(worker_init_fn).__name__}")
        if batch_size is not None and not _is_positive_int(batch_size):
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")

        if isinstance(dataset, IterableDataset):
            # A stream has no indices, so nothing can reorder or select from it.
            if shuffle:
                raise ValueError(
                    "DataLoader: shuffle=True needs a map-style dataset, got an IterableDataset "
                    f"({type(dataset).__name__}); shuffle inside its __iter__ instead"
                )
            if sampler is not None or batch_sampler is not None:
                raise ValueError(
                    "DataLoader: sampler and batch_sampler need a map-style dataset, got an "
                    f"IterableDataset ({type(dataset).__name__})"
                )

        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, sampler "
                    f"and drop_last; got batch_size={batch_size!r}, shuffle={shuffle!r}, "
                    f"sampler={'set' if sampler is not None else None}, drop_last={drop_last!r}"
                )
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError(
                "DataLoader: drop_last=True needs a batch_size, got batch_size=None (batching disabled)"
            )

        if sampler is not None and shuffle:
            raise ValueError(
                "DataLoader: sampler and shuffle=True are mutually exclusive; got both "
                "(shuffle inside the sampler instead)"
            )

        if not isinstance(dataset, IterableDataset):
            if sampler is None:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        if collate_fn is None:
            auto_batching = batch_size is not None or batch_sampler is not None
            collate_fn = default_collate if auto_batching else default_convert

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.multiprocessing_context = multiprocessing_context
        self.pin_memory_device = pin_memory_device
        self._workers = None  # the persistent workers' iterator
        # Where the current epoch is (state_dict): iterators started, batches given out, the
        # generator state its order was drawn from, the workers' seed draw.
        self._progress = {"epoch": -1, "yielded": 0, "done": True, "rng": None,
                          "seed_count": None}
        self._resume = None  # a state from load_state_dict, for the next __iter__

    def state_dict(self):
        """Where this loader is: a resumed loader (load_state_dict, then iter) yields the
        batches this one would have yielded next (plain data: numbers and lists)."""
        state = dict(self._progress)
        sampler = self.sampler
        if hasattr(sampler, "epoch"):  # DistributedSampler and its kin
            state["sampler_epoch"] = sampler.epoch
        if isinstance(sampler, DistributedSampler):
            state["num_replicas"] = sampler.num_replicas
        return state

    def load_state_dict(self, state):
        """The next iteration goes on from state's place: the rest of its epoch (or, when that
        epoch was done, the next one)."""
        missing = [k for k in ("epoch", "yielded", "done", "rng", "seed_count") if k not in state]
        if missing:
            raise ValueError(f"DataLoader.load_state_dict: the state lacks {', '.join(missing)}; "
                             f"expected one from DataLoader.state_dict()")
        self._resume = dict(state)
        if state.get("sampler_epoch") is not None and hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(state["sampler_epoch"])
        self._progress["epoch"] = state["epoch"] - (0 if state["done"] else 1)

    def _generator(self):
        """The generator the epoch's order is drawn from (a sampler's own, the loader's, or the
        default one)."""
        for g in (getattr(self.sampler, "generator", None), self.generator):
            if g is not None:
                return g
        return flow.default_generator

    def _tasks(self, resume):
        """This epoch's index lists (indices unbatched), and how many a resume skipped."""
        source = self.batch_sampler if self.batch_sampler is not None else self.sampler
        gen = self._generator()
        if resume is None or resume["done"]:
            self._progress["rng"] = [int(v) for v in gen.get_state().tolist()]
            return (None if source is None else iter(source)), 0
        skip = resume["yielded"]
        sampler = self.sampler
        saved_replicas = resume.get("num_replicas")
        if isinstance(sampler, DistributedSampler) and isinstance(self.batch_sampler, BatchSampler) \
                and saved_replicas not in (None, sampler.num_replicas):
            # Another world size: the first yielded * batch_size * saved ranks indices of the
            # epoch's order were taken; the new ranks share the rest.
            sampler._start = skip * self.batch_sampler.batch_size * saved_replicas
            skip = 0
        self._progress["rng"] = resume["rng"]
        if source is None:  # a stream: nothing to redraw, its batches are skipped by loading them
            return None, skip
        # Draw the epoch's order from the generator state it was drawn from, then put the
        # generator back where the checkpoint left it.
        now = gen.get_state()
        if resume["rng"] is not None:
            gen.set_state(flow.tensor(resume["rng"], dtype=flow.uint8))
        try:
            tasks = iter(source)
            for _ in itertools.islice(tasks, skip):
                pass
            first = next(tasks, _END)
        finally:
            gen.set_state(now)
        return (iter(()) if first is _END else itertools.chain([first], tasks)), skip

    def __iter__(self):
        resume, self._resume = self._resume, None
        if resume is not None and resume.get("seed_count") is not None and self.num_workers > 0:
            from oneflow import _random

            # the workers' base seed of the epoch being resumed
            _seed_draws.update(seedings=_random._seedings, count=resume["seed_count"] - 1)
        tasks, skip = self._tasks(resume)
        self._progress.update(epoch=self._progress["epoch"] + 1, yielded=skip, done=False)
        if self.num_workers > 0:
            if isinstance(self.dataset, IterableDataset) and skip:
                return self._skipping(_MultiProcessIter(self), skip)
            if not self.persistent_workers:
                return _MultiProcessIter(self, tasks, skip)
            if self._workers is None or not self._workers.alive():
                self._workers = _MultiProcessIter(self, tasks, skip)
            else:
                self._workers.start_epoch(tasks=tasks, offset=skip)
            return self._workers
        if isinstance(self.dataset, IterableDataset):
            return self._skipping(self._counted(self._iter_stream()), skip)
        return self._counted(self._iter_map(tasks))

    def _counted(self, batches):
        batches = iter(batches)
        while True:
            wait = range_or_none("DataLoader wait")  # the profiler's timeline shows the loading
            batch = next(batches, _END)
            if wait is not None:
                wait.end()
            if batch is _END:
                break
            self._progress["yielded"] += 1
            yield batch
        self._progress["done"] = True

    def _skipping(self, batches, skip):
        """A stream resumed mid-epoch: its first batches are loaded again and dropped (batches
        counts what it gives out)."""
        self._progress["yielded"] = 0
        for _ in itertools.islice(batches, skip):
            pass
        yield from batches

    def _iter_map(self, tasks):
        if self.batch_sampler is not None:
            for indices in tasks:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for index in tasks:
                yield self.collate_fn(self.dataset[index])

    def _iter_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError when the stream has no length, as in PyTorch
            if self.batch_size is None:
                return n
            if self.drop_last:
                return n // self.batch_size
            return (n + self.batch_size - 1) // self.batch_size
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


def _describe_exit(code):
    import signal

    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _MultiProcessIter:
    """Batches from num_workers processes, yielded in the order the sampler gives them."""

    def __init__(self, loader, tasks=None, offset=0):
        import multiprocessing

        from oneflow.utils.data import _worker

        self._worker = _worker
        # No reference back to the loader: a persistent loader holds this iterator, and in a
        # cycle the queues' finalizers could run before this one, losing the workers' stop.
        self.index_source = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
        self.prefetch = loader.prefetch_factor
        self.persistent = loader.persistent_workers
        self.timeout = loader.timeout
        try:
            self.length = len(loader)
        except TypeError:  # an IterableDataset without a length
            self.length = None
        n = loader.num_workers
        ctx = loader.multiprocessing_context
        if ctx is None or isinstance(ctx, str):
            try:
                ctx = multiprocessing.get_context(ctx or "fork")
            except ValueError:
                raise ValueError(f"DataLoader: unknown multiprocessing_context {ctx!r}, expected "
                                 f"one of {multiprocessing.get_all_start_methods()}") from None
        self.iterable = isinstance(loader.dataset, IterableDataset)
        base_seed = _base_seed()
        self.progress = loader._progress  # batches given out (the loader's state_dict)
        self.progress["seed_count"] = _seed_draws["count"]
        self.result_queue = ctx.Queue()
        self.index_queues, self.workers = [], []
        batching = loader.batch_size is not None or loader.batch_sampler is not None
        for worker_id in range(n):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()
            w = ctx.Process(
                target=_worker.worker_loop,
                args=(loader.dataset, index_queue, self.result_queue,
                      "iterable" if self.iterable else "map", loader.collate_fn,
                      loader.batch_size if batching else None, loader.drop_last, base_seed,
                      loader.worker_init_fn, worker_id, n, os.getpid()),
                daemon=True,
            )
            w.start()
            self.index_queues.append(index_queue)
            self.workers.append(w)
        self.epoch = -1
        self.shut = False
        self.start_epoch(first=True, tasks=tasks, offset=offset)

    def alive(self):
        return not self.shut and all(w.is_alive() for w in self.workers)

    def start_epoch(self, first=False, tasks=None, offset=0):
        """tasks: this epoch's index lists (default: the sampler's); offset: batches a resume
        skipped (they would have gone round-robin to the workers before)."""
        self.epoch += 1
        if self.iterable:
            self.tasks = itertools.repeat(None)
            if not first:
                for q in self.index_queues:
                    q.put("reset")
        else:
            self.tasks = tasks if tasks is not None else iter(self.index_source)
        self.active = [True] * len(self.workers)
        self.next_worker = offset % len(self.workers)
        self.sent = 0          # tasks handed out this epoch
        self.received = 0      # tasks yielded (or skipped) this epoch, in order
        self.buffer = {}       # task id -> batch that arrived before its turn
        self.owner = {}        # task id -> worker id
        for _ in range(self.prefetch * len(self.workers)):
            self._send_one()

    def _send_one(self):
        if not any(self.active):
            return
        indices = next(self.tasks, _END)
        if indices is _END:
            return
        while not self.active[self.next_worker]:
            self.next_worker = (self.next_worker + 1) % len(self.workers)
        w = self.next_worker
        self.next_worker = (w + 1) % len(self.workers)
        self.index_queues[w].put((self.epoch, self.sent, list(indices) if isinstance(indices, (list, tuple)) else indices))
        self.owner[self.sent] = w
        self.sent += 1

    def __iter__(self):
        return self

    def __len__(self):
        if self.length is None:
            raise TypeError("DataLoader: this IterableDataset has no len()")
        return self.length

    def __next__(self):
        while True:
            if self.received == self.sent:
                self.progress["done"] = True
                self._end_epoch()
                raise StopIteration
            if self.received in self.buffer:
                data = self.buffer.pop(self.received)
                task = self.received
                self.received += 1
                if isinstance(data, self._worker.IterableEnd):
                    # This worker's dataset copy is done: no more tasks for it.
                    self.active[data.worker_id] = False
                    self._send_one()
                    continue
                self._send_one()
                if isinstance(data, self._worker.ExceptionInWorker):
                    self.shutdown(grace=0.2)
                    data.reraise()
                del self.owner[task]
                self.progress["yielded"] += 1
                return data
            epoch, task, data = self._get()
            if epoch == self.epoch:
                self.buffer[task] = data

    def _get(self):
        wait = range_or_none("DataLoader wait")  # for a worker's batch, in the profiler
        try:
            return self._wait_for_result()
        finally:
            if wait is not None:
                wait.end()

    def _wait_for_result(self):
        import queue
        import time

        timeout = self.timeout
        start = time.monotonic()
        while True:
            try:
                return self.result_queue.get(timeout=_LIVENESS_SECONDS)
            except queue.Empty:
                pass
            for worker_id, w in enumerate(self.workers):
                if not w.is_alive():
                    code = w.exitcode
                    self.shutdown(grace=0.2)
                    raise RuntimeError(
                        f"DataLoader worker {worker_id} (pid {w.pid}) exited unexpectedly "
                        f"({_describe_exit(code)}) while batch {self.received} was loading")
            if timeout and time.monotonic() - start > timeout:
                worker = self.owner.get(self.received)
                self.shutdown(grace=0.2)
                raise RuntimeError(f"DataLoader: timed out after {timeout} seconds waiting for batch "
                                   f"{self.received} from worker {worker}")

    def _end_epoch(self):
        if not self.persistent:
            self.shutdown()

    def shutdown(self, grace=5.0):
        """Stops the workers: idle ones end at once; after an error (grace 0.2 s) a worker
        still busy with a batch nobody will read is terminated."""
        if self.shut:
            return
        self.shut = True
        for q in self.index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self.workers:
            w.join(timeout=grace)
            if w.is_alive():
                w.terminate()
                w.join(timeout=1)
        for q in self.index_queues + [self.result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self.shutdown()
        except Exception:
            pass


_END = object()
