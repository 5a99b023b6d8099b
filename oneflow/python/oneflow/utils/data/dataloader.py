"""DataLoader: batches of samples from a dataset, with PyTorch's arguments.

Loading runs in the calling process. ``num_workers > 0`` is accepted so that
PyTorch scripts run unchanged, but no worker processes are started (and
``worker_init_fn``, ``pin_memory``, ``timeout``, ``prefetch_factor`` and
``persistent_workers`` have nothing to act on); the batches are the same as
with ``num_workers=0``.
"""
from oneflow.utils.data.collate import default_collate, default_convert
from oneflow.utils.data.dataset import IterableDataset
from oneflow.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """Always None: data is loaded in the main process (as PyTorch reports there)."""
    return None


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
        num_workers: accepted for compatibility; loading is always in-process.
        collate_fn: merges a list of samples into a batch (default: ``default_collate``).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        generator: passed to the ``RandomSampler`` made for ``shuffle=True``.
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
    ):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"DataLoader: drop_last must be a bool, got {drop_last!r}")
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

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            return self._iter_stream()
        return self._iter_map()

    def _iter_map(self):
        if self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for index in self.sampler:
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
