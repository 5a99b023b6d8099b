"""Tests of oneflow.utils.data: DataLoader, collate, samplers, datasets, distributed samplers."""
import collections

import numpy as np
import pytest

import oneflow as flow
from oneflow.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedBatchSampler,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    default_collate,
    random_split,
)


def make_tensor_dataset(n):
    x = flow.tensor([[float(i), float(i) + 0.5] for i in range(n)], dtype=flow.float32)
    y = flow.tensor(list(range(n)), dtype=flow.int64)
    return TensorDataset(x, y)


class DictDataset(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"image": flow.tensor([float(i)] * 3, dtype=flow.float32), "label": i, "name": f"s{i}"}


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def labels_of(loader):
    return [y.tolist() for _, y in loader]


# ---------------------------------------------------------------- DataLoader


def test_batching_shapes_and_values():
    loader = DataLoader(make_tensor_dataset(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3
    assert [len(y) for _, y in batches] == [4, 4, 2]
    X, y = batches[0]
    assert tuple(X.shape) == (4, 2)
    assert X.dtype == flow.float32
    assert y.dtype == flow.int64
    assert X.tolist() == [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5], [3.0, 3.5]]
    assert labels_of(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_default_batch_size_is_one():
    loader = DataLoader(make_tensor_dataset(3))
    assert labels_of(loader) == [[0], [1], [2]]


def test_drop_last():
    loader = DataLoader(make_tensor_dataset(10), batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert labels_of(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    exact = DataLoader(make_tensor_dataset(8), batch_size=4, drop_last=True)
    assert len(exact) == 2 and len(list(exact)) == 2


def test_shuffle_is_reproducible_with_manual_seed():
    loader = DataLoader(make_tensor_dataset(20), batch_size=5, shuffle=True)
    flow.manual_seed(123)
    first = labels_of(loader)
    second_epoch = labels_of(loader)
    flow.manual_seed(123)
    again = labels_of(loader)
    assert first == again
    flat = [i for batch in first for i in batch]
    assert sorted(flat) == list(range(20))
    assert flat != list(range(20))  # 1 / 20! chance of a false failure
    assert first != second_epoch  # a new order every epoch


def test_num_workers_gives_the_same_batches():
    a = labels_of(DataLoader(make_tensor_dataset(7), batch_size=3, num_workers=2))
    b = labels_of(DataLoader(make_tensor_dataset(7), batch_size=3))
    assert a == b


def test_collate_dicts():
    loader = DataLoader(DictDataset(5), batch_size=2)
    batches = list(loader)
    assert len(batches) == 3
    first = batches[0]
    assert set(first) == {"image", "label", "name"}
    assert tuple(first["image"].shape) == (2, 3)
    assert first["image"].tolist() == [[0.0] * 3, [1.0] * 3]
    assert first["label"].tolist() == [0, 1]
    assert first["label"].dtype == flow.int64
    assert first["name"] == ["s0", "s1"]
    assert batches[-1]["label"].tolist() == [4]


def test_collate_tuples_numbers_and_strings():
    batch = default_collate([(1, 2.0, "a"), (3, 4.0, "b")])
    assert isinstance(batch, list) and len(batch) == 3  # tuples become lists, as in PyTorch
    ints, floats, strings = batch
    assert ints.dtype == flow.int64 and ints.tolist() == [1, 3]
    assert floats.dtype == flow.float64 and floats.tolist() == [2.0, 4.0]
    assert strings == ["a", "b"]


def test_collate_nested_and_namedtuple():
    Point = collections.namedtuple("Point", ["x", "y"])
    batch = default_collate([Point(1, {"k": 2}), Point(3, {"k": 4})])
    assert isinstance(batch, Point)
    assert batch.x.tolist() == [1, 3]
    assert batch.y["k"].tolist() == [2, 4]


def test_collate_tensors_and_numpy():
    stacked = default_collate([flow.tensor([1.0, 2.0]), flow.tensor([3.0, 4.0])])
    assert tuple(stacked.shape) == (2, 2) and stacked.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    arrays = default_collate([np.array([1, 2], dtype=np.float32), np.array([3, 4], dtype=np.float32)])
    assert isinstance(arrays, flow.Tensor)
    assert arrays.dtype == flow.float32 and arrays.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    scalars = default_collate([np.int64(5), np.int64(6)])
    assert scalars.dtype == flow.int64 and scalars.tolist() == [5, 6]


def test_collate_errors():
    with pytest.raises(TypeError, match=r"^default_collate: samples must be tensors, numpy arrays, numbers, str, dicts or lists, got object$"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match=r"same number of elements, got lengths \[1, 2\]"):
        default_collate([(1,), (1, 2)])


def test_batch_size_none_disables_batching():
    loader = DataLoader(make_tensor_dataset(3), batch_size=None)
    samples = list(loader)
    assert len(loader) == 3
    assert [y.tolist() for _, y in samples] == [0, 1, 2]


def test_custom_collate_fn_and_batch_sampler():
    loader = DataLoader(
        make_tensor_dataset(6),
        batch_sampler=[[5, 0], [2]],
        collate_fn=lambda samples: [int(y.tolist()) for _, y in samples],
    )
    assert list(loader) == [[5, 0], [2]]


def test_iterable_dataset_batching():
    loader = DataLoader(Stream(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(loader) == 3
    dropped = DataLoader(Stream(7), batch_size=3, drop_last=True)
    assert [b.tolist() for b in dropped] == [[0, 1, 2], [3, 4, 5]]
    assert len(dropped) == 2


def test_dataloader_errors():
    ds = make_tensor_dataset(4)
    with pytest.raises(ValueError, match=r"^DataLoader: batch_size must be a positive integer, got 0$"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match=r"^DataLoader: batch_size must be a positive integer, got -2$"):
        DataLoader(ds, batch_size=-2)
    with pytest.raises(ValueError, match=r"^DataLoader: num_workers must be a non-negative integer, got -1$"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match=r"^DataLoader: sampler and shuffle=True are mutually exclusive"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match=r"^DataLoader: batch_sampler is mutually exclusive with batch_size"):
        DataLoader(ds, batch_size=2, batch_sampler=[[0, 1]])
    with pytest.raises(ValueError, match=r"^DataLoader: shuffle=True needs a map-style dataset, got an IterableDataset \(Stream\)"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(ValueError, match=r"^DataLoader: drop_last=True needs a batch_size"):
        DataLoader(ds, batch_size=None, drop_last=True)


# ---------------------------------------------------------------- samplers and datasets


def test_sequential_and_batch_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert list(BatchSampler(SequentialSampler(range(5)), 2, False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(SequentialSampler(range(5)), 2, True)) == [[0, 1], [2, 3]]
    assert len(BatchSampler(range(5), 2, False)) == 3
    assert len(BatchSampler(range(5), 2, True)) == 2
    with pytest.raises(ValueError, match=r"^BatchSampler: batch_size must be a positive integer, got 0$"):
        BatchSampler(range(5), 0, False)


def test_random_sampler():
    sampler = RandomSampler(range(10))
    flow.manual_seed(7)
    a = list(sampler)
    flow.manual_seed(7)
    assert list(sampler) == a
    assert sorted(a) == list(range(10))
    longer = list(RandomSampler(range(4), num_samples=10))
    assert len(longer) == 10
    assert sorted(longer[:4]) == sorted(longer[4:8]) == [0, 1, 2, 3]
    flow.manual_seed(3)
    with_replacement = list(RandomSampler(range(3), replacement=True, num_samples=50))
    flow.manual_seed(3)
    assert list(RandomSampler(range(3), replacement=True, num_samples=50)) == with_replacement
    assert len(with_replacement) == 50 and set(with_replacement) <= {0, 1, 2}
    assert list(RandomSampler(range(0))) == []


def test_subset_random_sampler():
    assert sorted(SubsetRandomSampler([3, 5, 9])) == [3, 5, 9]


def test_tensor_dataset_and_errors():
    ds = make_tensor_dataset(3)
    x, y = ds[2]
    assert x.tolist() == [2.0, 2.5] and y.tolist() == 2
    assert len(ds) == 3
    with pytest.raises(ValueError, match=r"^TensorDataset: all tensors must have the same size in dim 0, got sizes \[3, 2\]$"):
        TensorDataset(flow.tensor([1, 2, 3]), flow.tensor([1, 2]))


def test_subset_and_concat():
    a, b = list(range(3)), list(range(10, 15))
    cat = ConcatDataset([a, b])
    assert len(cat) == 8
    assert [cat[i] for i in range(8)] == [0, 1, 2, 10, 11, 12, 13, 14]
    assert cat[-1] == 14 and cat[-8] == 0
    with pytest.raises(IndexError):
        cat[8]
    sub = Subset(b, [4, 0])
    assert len(sub) == 2 and [sub[0], sub[1]] == [14, 10]
    added = make_tensor_dataset(2) + make_tensor_dataset(3)
    assert isinstance(added, ConcatDataset) and len(added) == 5


def test_random_split():
    data = list(range(10))
    flow.manual_seed(0)
    parts = random_split(data, [3, 7])
    assert [len(p) for p in parts] == [3, 7]
    got = sorted(parts[0][i] for i in range(3)) + sorted(parts[1][i] for i in range(7))
    assert sorted(got) == data
    flow.manual_seed(0)
    again = random_split(data, [3, 7])
    assert list(again[0].indices) == list(parts[0].indices)
    fractions = random_split(data, [0.5, 0.3, 0.2])
    assert [len(p) for p in fractions] == [5, 3, 2]
    with pytest.raises(ValueError, match=r"^random_split: lengths \[3, 6\] sum to 9 but the dataset has length 10$"):
        random_split(data, [3, 6])


# ---------------------------------------------------------------- DistributedSampler


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10, 12, 13])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_sampler_matches_torch(n, replicas, drop_last):
    torch = pytest.importorskip("torch")
    dataset = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(dataset, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(
            dataset, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last
        )
        assert list(ours) == list(theirs), (n, replicas, rank, drop_last)
        assert len(ours) == len(theirs)
        assert ours.total_size == theirs.total_size


def gather(samplers):
    """The padded index list the ranks were cut from (rank r holds positions r, r + R, ...)."""
    replicas = len(samplers)
    per_rank = [list(s) for s in samplers]
    full = [None] * sum(len(p) for p in per_rank)
    for rank, indices in enumerate(per_rank):
        full[rank::replicas] = indices
    return full


@pytest.mark.parametrize("n,replicas", [(100, 4), (10, 3), (2, 5)])
def test_distributed_sampler_shuffle_semantics(n, replicas):
    def samplers(seed=0, epoch=0):
        result = [DistributedSampler(range(n), num_replicas=replicas, rank=r, seed=seed) for r in range(replicas)]
        for s in result:
            s.set_epoch(epoch)
        return result

    full = gather(samplers())
    total = samplers()[0].total_size
    assert len(full) == total == -(-n // replicas) * replicas
    # The first n positions are a permutation; the padding repeats the list from its start.
    assert sorted(full[:n]) == list(range(n))
    padding = full[n:]
    assert padding == (full[:n] * replicas)[: len(padding)]
    # Same seed and epoch: same order; another epoch or seed: another order.
    assert gather(samplers()) == full
    if n > 3:
        assert gather(samplers(epoch=1)) != full
        assert gather(samplers(seed=1)) != full
        assert full[:n] != list(range(n))


def test_distributed_sampler_drop_last_shuffled_is_disjoint():
    samplers = [DistributedSampler(range(10), num_replicas=3, rank=r, drop_last=True) for r in range(3)]
    parts = [list(s) for s in samplers]
    assert all(len(p) == 3 for p in parts)
    flat = [i for p in parts for i in p]
    assert len(set(flat)) == 9


def test_distributed_sampler_defaults_to_single_process():
    sampler = DistributedSampler(range(5), shuffle=False)
    assert sampler.num_replicas == flow.env.get_world_size() == 1
    assert sampler.rank == flow.env.get_rank() == 0
    assert list(sampler) == [0, 1, 2, 3, 4]


def test_distributed_sampler_invalid_rank():
    with pytest.raises(ValueError, match=r"^DistributedSampler: invalid rank 3; rank must be in \[0, 2\] for num_replicas=3$"):
        DistributedSampler(range(5), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match=r"^DistributedSampler: invalid rank -1; "):
        DistributedSampler(range(5), num_replicas=3, rank=-1)
    with pytest.raises(ValueError, match=r"^DistributedSampler: num_replicas must be a positive integer, got 0$"):
        DistributedSampler(range(5), num_replicas=0, rank=0)


def test_distributed_sampler_with_dataloader():
    ds = make_tensor_dataset(10)
    loaders = [
        DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, num_replicas=2, rank=r, shuffle=False))
        for r in range(2)
    ]
    assert labels_of(loaders[0]) == [[0, 2], [4, 6], [8]]
    assert labels_of(loaders[1]) == [[1, 3], [5, 7], [9]]


# ---------------------------------------------------------------- DistributedBatchSampler


def test_distributed_batch_sampler_layout():
    # Paddle's layout: ranks take blocks of batch_size in turn; the last partial
    # round (here indices 6..9) is split evenly.
    def batches(rank, drop_last=False):
        return list(DistributedBatchSampler(range(10), 3, num_replicas=2, rank=rank, drop_last=drop_last))

    assert batches(0) == [[0, 1, 2], [6, 7]]
    assert batches(1) == [[3, 4, 5], [8, 9]]
    assert batches(0, drop_last=True) == [[0, 1, 2]]
    assert batches(1, drop_last=True) == [[3, 4, 5]]
    assert len(DistributedBatchSampler(range(10), 3, num_replicas=2, rank=0)) == 2
    assert len(DistributedBatchSampler(range(10), 3, num_replicas=2, rank=0, drop_last=True)) == 1
    # Padding from the start when the dataset does not divide evenly.
    assert list(DistributedBatchSampler(range(5), 2, num_replicas=2, rank=1)) == [[2, 3], [0]]
    # One process: plain batches.
    assert list(DistributedBatchSampler(range(5), 2, num_replicas=1, rank=0)) == [[0, 1], [2, 3], [4]]


def test_distributed_batch_sampler_shuffle_and_epochs():
    def epoch_indices(epoch, replicas=3):
        result = []
        for rank in range(replicas):
            sampler = DistributedBatchSampler(range(20), 4, num_replicas=replicas, rank=rank, shuffle=True)
            sampler.set_epoch(epoch)
            result.append([i for batch in sampler for i in batch])
        return result

    first = epoch_indices(0)
    assert all(len(p) == 7 for p in first)  # ceil(20 / 3)
    flat = [i for p in first for i in p]
    assert sorted(set(flat)) == list(range(20)) and len(flat) == 21
    assert epoch_indices(0) == first
    assert epoch_indices(1) != first
    # As in Paddle, each shuffled pass advances the epoch by itself.
    sampler = DistributedBatchSampler(range(20), 4, num_replicas=1, rank=0, shuffle=True)
    assert list(sampler) != list(sampler)
    assert sampler.epoch == 2


def test_distributed_batch_sampler_with_dataloader_and_errors():
    ds = make_tensor_dataset(6)
    loader = DataLoader(ds, batch_sampler=DistributedBatchSampler(ds, 2, num_replicas=2, rank=1))
    assert labels_of(loader) == [[2, 3], [5]]
    # 6 = one full round of 2 x 2, then 2 left split 1 / 1
    assert list(DistributedBatchSampler(ds, 2, num_replicas=2, rank=0)) == [[0, 1], [4]]
    with pytest.raises(ValueError, match=r"^DistributedBatchSampler: batch_size must be a positive integer, got 0$"):
        DistributedBatchSampler(ds, 0)
    with pytest.raises(ValueError, match=r"^DistributedBatchSampler: invalid rank 2; rank must be in \[0, 1\] for num_replicas=2$"):
        DistributedBatchSampler(ds, 2, num_replicas=2, rank=2)
