"""Samplers that give each process (rank) its own share of a dataset.

``DistributedSampler`` follows ``torch.utils.data.DistributedSampler``;
``DistributedBatchSampler`` follows ``paddle.io.DistributedBatchSampler``.
Shuffling uses ``random.Random(seed)``: the same seed gives the same order in
every process, with no dependence on oneflow's global RNG state (which can
differ between processes).
"""
import math
import random

import oneflow as flow


def _check_replicas(owner, num_replicas, rank):
    """Fills in num_replicas/rank from oneflow.env and validates them."""
    if num_replicas is None:
        num_replicas = flow.env.get_world_size()
    if rank is None:
        rank = flow.env.get_rank()
    if not isinstance(num_replicas, int) or isinstance(num_replicas, bool) or num_replicas < 1:
        raise ValueError(f"{owner}: num_replicas must be a positive integer, got {num_replicas!r}")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < num_replicas:
        raise ValueError(
            f"{owner}: invalid rank {rank!r}; rank must be in [0, {num_replicas - 1}] for num_replicas={num_replicas}"
        )
    return num_replicas, rank


class DistributedSampler:
    """Indices for one rank out of ``num_replicas``, exactly as PyTorch:

    * the index list (``range(len(dataset))``, shuffled with ``seed + epoch``
      when ``shuffle``) is padded by repeating indices from its start until its
      length is divisible by ``num_replicas`` -- or, with ``drop_last``, cut
      down to the largest such length;
    * rank ``r`` takes ``indices[r:total_size:num_replicas]``.

    Call ``set_epoch(epoch)`` before each epoch so that shuffling changes
    between epochs (identically on every rank).
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        num_replicas, rank = _check_replicas("DistributedSampler", num_replicas, rank)
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # Drop the tail so that every rank gets the same number of samples.
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        indices = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        # A DataLoader resumed in another world size: the first _start indices of this epoch's
        # order were taken by the ranks before; these ranks share the rest.
        start, self._start = getattr(self, "_start", 0), 0
        if start:
            indices = indices[start:]
            if not indices:
                return iter([])
            n = len(indices)
            total = (n // self.num_replicas if self.drop_last else -(-n // self.num_replicas)) \
                * self.num_replicas
            indices = (indices * -(-total // n))[:total]
            return iter(indices[self.rank:total:self.num_replicas])
        if not self.drop_last:
            padding_size = self.total_size - len(indices)
            if padding_size <= len(indices):
                indices += indices[:padding_size]
            else:
                # Fewer samples than replicas: repeat the whole list as often as needed.
                indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        else:
            indices = indices[: self.total_size]
        assert len(indices) == self.total_size
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Sets the epoch used in the shuffle seed (``seed + epoch``)."""
        self.epoch = epoch


class DistributedBatchSampler:
    """Batches of indices for one rank, as PaddlePaddle's sampler of this name
    (use it as ``DataLoader(dataset, batch_sampler=...)``).

    The index list is padded from its start to ``num_samples * num_replicas``
    (``num_samples = ceil(len(dataset) / num_replicas)``) and, when
    ``shuffle``, shuffled with ``random.Random(epoch)``. Ranks then take
    consecutive blocks of ``batch_size`` in turn; the final partial round is
    split evenly. Each rank yields its ``num_samples`` indices in lists of
    ``batch_size`` (the last, shorter list is dropped when ``drop_last``).

    As in Paddle, every shuffled pass advances ``epoch`` by one, so epochs
    differ even without ``set_epoch``; ``set_epoch(e)`` pins the order.
    """

    def __init__(self, dataset, batch_size, num_replicas=None, rank=None, shuffle=False, drop_last=False):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(
                f"DistributedBatchSampler: batch_size must be a positive integer, got {batch_size!r}"
            )
        if not isinstance(shuffle, bool):
            raise ValueError(f"DistributedBatchSampler: shuffle must be a bool, got {shuffle!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"DistributedBatchSampler: drop_last must be a bool, got {drop_last!r}")
        num_replicas, rank = _check_replicas("DistributedBatchSampler", num_replicas, rank)
        self.dataset = dataset
        self.batch_size = batch_size
        self.nranks = num_replicas
        self.local_rank = rank
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.epoch = 0
        self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def _rank_indices(self, indices):
        # Rounds of batch_size * nranks indices: rank r takes block r of each round.
        round_size = self.batch_size * self.nranks
        last_round = self.total_size % round_size  # divisible by nranks
        last_local = last_round // self.nranks
        mine = []
        for start in range(self.local_rank * self.batch_size, self.total_size - last_round, round_size):
            mine.extend(indices[start : start + self.batch_size])
        tail = indices[self.total_size - last_round :]
        mine.extend(tail[self.local_rank * last_local : (self.local_rank + 1) * last_local])
        return mine

    def __iter__(self):
        indices = list(range(len(self.dataset)))
        padding_size = self.total_size - len(indices)
        if padding_size > 0:
            # Repeat from the start; more than once when there are fewer samples than ranks.
            indices += (indices * math.ceil(padding_size / len(indices)))[:padding_size]
        if self.shuffle:
            random.Random(self.epoch).shuffle(indices)
            self.epoch += 1
        if self.nranks > 1:
            indices = self._rank_indices(indices)
        assert len(indices) == self.num_samples
        batch = []
        for index in indices:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return self.num_samples // self.batch_size
        return (self.num_samples + self.batch_size - 1) // self.batch_size

    def set_epoch(self, epoch):
        """Sets the epoch that seeds the next shuffle."""
        self.epoch = epoch
