"""Samplers: iterables of dataset indices (or, for BatchSampler, of index lists)."""
import random

import oneflow as flow


def _is_positive_int(value):
    # bool is an int subclass, but batch_size=True is a mistake, not 1.
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _randperm(n, generator=None):
    # Pass generator only when given: plain flow.randperm(n) then suffices, and
    # flow.manual_seed makes the order reproducible.
    if generator is None:
        return flow.randperm(n).tolist()
    return flow.randperm(n, generator=generator).tolist()


def _python_rng(generator=None):
    """A random.Random seeded from oneflow's RNG, for draws that a permutation
    cannot express (sampling with replacement) while still honouring
    flow.manual_seed. A permutation of 32 items carries log2(32!) ~ 117 bits."""
    seed = 0
    for value in _randperm(32, generator):
        seed = seed * 32 + value
    return random.Random(seed)


class Sampler:
    """Base class: subclasses define ``__iter__`` (yielding indices) and usually ``__len__``."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order from ``flow.randperm`` (a fresh order every
    epoch; ``flow.manual_seed`` makes the sequence of orders reproducible).

    With ``replacement=True``, draws ``num_samples`` indices uniformly with
    replacement. Without replacement, ``num_samples`` larger than the dataset
    concatenates several permutations, as PyTorch does."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r}")
        if num_samples is not None and not _is_positive_int(num_samples):
            raise ValueError(
                f"RandomSampler: num_samples must be a positive integer, got {num_samples!r}"
            )

    @property
    def num_samples(self):
        # Read the length late: the dataset may change size after construction.
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if n == 0:
            if self._num_samples:
                raise ValueError(
                    f"RandomSampler: cannot draw num_samples={self._num_samples} from an empty dataset"
                )
            return
        if self.replacement:
            rng = _python_rng(self.generator)
            for _ in range(self.num_samples):
                yield rng.randrange(n)
            return
        for _ in range(self.num_samples // n):
            yield from _randperm(n, self.generator)
        yield from _randperm(n, self.generator)[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order from ``flow.randperm``."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``; the last,
    shorter list is dropped when ``drop_last``."""

    def __init__(self, sampler, batch_size, drop_last):
        if not _is_positive_int(batch_size):
            raise ValueError(f"BatchSampler: batch_size must be a positive integer, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last must be a bool, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
