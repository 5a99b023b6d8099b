"""Dataset classes: map-style ``Dataset`` (``__getitem__`` + ``__len__``) and
``IterableDataset`` (``__iter__``), plus the usual combinators."""
import bisect
import itertools
import math

import oneflow as flow


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and
    ``__len__()``. ``a + b`` concatenates two datasets."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__()``. The DataLoader
    batches it in order; samplers and shuffle do not apply."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; all tensors must have
    the same size in dimension 0."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: needs at least one tensor, got none")
        sizes = [len(t) for t in tensors]
        if any(size != sizes[0] for size in sizes):
            raise ValueError(
                f"TensorDataset: all tensors must have the same size in dim 0, got sizes {sizes}"
            )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: needs at least one dataset, got an empty list")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError(
                    "ConcatDataset: cannot concatenate an IterableDataset "
                    f"({type(d).__name__}); use ChainDataset"
                )
        # cumulative_sizes[k] is the number of samples in datasets[0..k].
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise IndexError(
                    f"ConcatDataset: index {index} out of range for length {len(self)}"
                )
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which >= len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for length {len(self)}")
        start = 0 if which == 0 else self.cumulative_sizes[which - 1]
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def _randperm(n, generator=None):
    # Only pass generator when given, so plain flow.randperm(n) is all that is needed
    # and flow.manual_seed makes the result reproducible.
    if generator is None:
        return flow.randperm(n).tolist()
    return flow.randperm(n, generator=generator).tolist()


def _split_lengths(total, lengths):
    """Turns fractions summing to 1 into integer lengths (PyTorch's rule: floor
    each, then hand out the remainder one at a time from the first split)."""
    lengths = list(lengths)
    is_fractions = (
        lengths
        and math.isclose(sum(lengths), 1)
        and all(isinstance(x, float) and 0 <= x <= 1 for x in lengths)
    )
    if not is_fractions:
        return lengths
    counts = [int(math.floor(total * frac)) for frac in lengths]
    for i in range(total - sum(counts)):
        counts[i % len(counts)] += 1
    return counts


def random_split(dataset, lengths, generator=None):
    """Splits ``dataset`` into non-overlapping random ``Subset``s of the given
    lengths (integers summing to ``len(dataset)``, or fractions summing to 1).
    The permutation comes from ``flow.randperm``, so ``flow.manual_seed`` fixes it."""
    n = len(dataset)
    lengths = _split_lengths(n, lengths)
    for length in lengths:
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise ValueError(
                f"random_split: lengths must be non-negative integers or fractions summing to 1, got {lengths}"
            )
    if sum(lengths) != n:
        raise ValueError(
            f"random_split: lengths {lengths} sum to {sum(lengths)} but the dataset has length {n}"
        )
    indices = _randperm(n, generator)
    subsets = []
    for end, length in zip(itertools.accumulate(lengths), lengths):
        subsets.append(Subset(dataset, indices[end - length : end]))
    return subsets
