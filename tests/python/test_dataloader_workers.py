"""DataLoader with num_workers > 0: the same batches in the same order as num_workers=0,
worker seeding and worker_init_fn, IterableDataset sharding, persistent workers, and the errors
when a worker fails, dies or is late."""
import os
import signal
import time

import numpy as np
import pytest

import oneflow as flow
import flowvision
import flowvision.transforms as transforms
from oneflow.utils.data import (
    DataLoader, Dataset, DistributedSampler, IterableDataset, TensorDataset, get_worker_info,
)
from oneflow.utils.vision.fake_data import write_fake_cifar10


def as_lists(loader):
    return [[t.numpy().tolist() if isinstance(t, flow.Tensor) else t for t in batch] for batch in loader]


def test_workers_give_the_batches_of_the_main_process_in_order():
    flow.manual_seed(0)
    ds = TensorDataset(flow.randn(103, 4), flow.arange(103))
    for kwargs in ({"shuffle": True}, {"shuffle": False, "drop_last": True},
                   {"sampler": DistributedSampler(ds, num_replicas=3, rank=1, seed=5)}):
        runs = []
        for workers in (0, 2, 3):
            flow.manual_seed(7)  # the shuffle draws from the main process's generator either way
            runs.append(as_lists(DataLoader(ds, batch_size=8, num_workers=workers, **kwargs)))
        assert runs[0] == runs[1] == runs[2], kwargs
    # Without batching (batch_size=None) each item comes alone, in order.
    single = list(DataLoader(ds, batch_size=None, num_workers=2))
    assert [int(y) for _, y in single] == list(range(103))


def test_a_flowvision_dataset_through_workers(tmp_path):
    write_fake_cifar10(tmp_path, n_per_batch=10, seed=1, layout="python")
    pipeline = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,) * 3, (0.25,) * 3)])
    ds = flowvision.datasets.CIFAR10(tmp_path, transform=pipeline)
    a = as_lists(DataLoader(ds, batch_size=16, num_workers=0))
    b = as_lists(DataLoader(ds, batch_size=16, num_workers=2, pin_memory=True, prefetch_factor=1))
    assert a == b and len(a) == 4


class Noise(Dataset):
    """Items drawn from the worker's generators: oneflow's, Python's and numpy's."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        import random

        info = get_worker_info()
        return [info.id if info else -1, flow.rand(1).item(), random.random(), float(np.random.rand())]


def test_workers_are_seeded_per_worker_and_repeat_under_manual_seed():
    def run():
        flow.manual_seed(11)
        return as_lists(DataLoader(Noise(), batch_size=2, num_workers=2))

    first, again = run(), run()
    assert first == again
    ids = [batch[0] for batch in first]
    assert ids == [[0, 0], [1, 1], [0, 0], [1, 1]]  # batches handed out round-robin
    values = [v for batch in first for column in batch[1:] for v in column]
    assert len(set(values)) == len(values)  # the two workers draw different numbers
    flow.manual_seed(12)
    assert as_lists(DataLoader(Noise(), batch_size=2, num_workers=2)) != first
    assert get_worker_info() is None  # in the main process


def test_worker_init_fn_and_get_worker_info(tmp_path):
    def init(worker_id):
        info = get_worker_info()
        (tmp_path / f"w{worker_id}").write_text(f"{info.id} {info.num_workers} {info.seed} {len(info.dataset)}")

    list(DataLoader(Noise(), batch_size=4, num_workers=2, worker_init_fn=init))
    w0, w1 = (tmp_path / "w0").read_text().split(), (tmp_path / "w1").read_text().split()
    assert (w0[0], w0[1], w0[3]) == ("0", "2", "8") and (w1[0], w1[1]) == ("1", "2")
    assert int(w1[2]) == int(w0[2]) + 1  # base seed + worker id, as PyTorch


class Shards(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        return iter(range(start, self.n, step))


def test_iterable_dataset_shards_by_worker():
    got = [b.tolist() for b in DataLoader(Shards(11), batch_size=2, num_workers=2)]
    # Worker 0 yields 0, 2, 4, ...; worker 1 yields 1, 3, ...; their batches alternate.
    assert got == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]
    assert sorted(v for b in got for v in b) == list(range(11))
    assert [b.tolist() for b in DataLoader(Shards(5), batch_size=2, num_workers=2, drop_last=True)] == [[0, 2], [1, 3]]


def test_persistent_workers_stay_between_epochs():
    ds = TensorDataset(flow.arange(20))
    loader = DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=True)
    epochs, pids = [], []
    for _ in range(3):
        epochs.append([b[0].tolist() for b in loader])
        pids.append([w.pid for w in loader._workers.workers])
    assert epochs[0] == epochs[1] == epochs[2] == [list(range(i, min(i + 3, 20))) for i in range(0, 20, 3)]
    assert pids[0] == pids[1] == pids[2]
    # An epoch left early does not leak its batches into the next one.
    for i, _ in enumerate(loader):
        if i == 1:
            break
    assert [b[0].tolist() for b in loader] == epochs[0]
    streams = DataLoader(Shards(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in streams] == [b.tolist() for b in streams] == [[0, 2], [1, 3], [4], [5]]


def test_tqdm_over_a_dataloader_knows_its_length():
    tqdm = pytest.importorskip("tqdm").tqdm
    loader = DataLoader(TensorDataset(flow.arange(50)), batch_size=8, num_workers=2)
    bar = tqdm(loader, disable=True)
    assert bar.total == len(loader) == 7
    assert sum(len(b[0]) for b in bar) == 50


class Failing(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 7:
            raise KeyError(f"no sample {i}")
        return i


def test_an_exception_in_a_worker_is_raised_with_its_traceback():
    with pytest.raises(KeyError) as info:
        list(DataLoader(Failing(), batch_size=2, num_workers=2))
    message = info.value.args[0]
    assert message.startswith("DataLoader worker 1 (pid ") and message.endswith(
        " failed on batch 3: KeyError: 'no sample 7'")
    assert "raise KeyError" in info.value.__notes__[0]

    def bad_init(worker_id):
        raise RuntimeError(f"init {worker_id} failed")

    with pytest.raises(RuntimeError, match=r"^DataLoader worker 0 \(pid \d+\) failed on the worker's start "
                                           r"\(worker_init_fn or dataset setup\): RuntimeError: init 0 failed$"):
        list(DataLoader(Noise(), batch_size=2, num_workers=2, worker_init_fn=bad_init))


class Slow(Dataset):
    def __init__(self, seconds, kill_at=None):
        self.seconds, self.kill_at = seconds, kill_at

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.seconds)
        return i


def test_a_dead_worker_and_a_late_batch_are_errors_not_hangs():
    with pytest.raises(RuntimeError, match=r"^DataLoader worker 1 \(pid \d+\) exited unexpectedly \(killed by "
                                           r"signal SIGKILL\) while batch \d was loading$"):
        list(DataLoader(Slow(0.0, kill_at=1), batch_size=1, num_workers=2))
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^DataLoader: timed out after 1 seconds waiting for batch 0 from worker 0$"):
        list(DataLoader(Slow(30.0), batch_size=1, num_workers=1, timeout=1))
    assert time.monotonic() - start < 10


def test_argument_errors():
    ds = TensorDataset(flow.arange(4))
    with pytest.raises(ValueError, match=r"^DataLoader: persistent_workers=True needs num_workers > 0, got num_workers=0$"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match=r"^DataLoader: timeout must be a non-negative number of seconds, got -1$"):
        DataLoader(ds, num_workers=1, timeout=-1)
    with pytest.raises(ValueError, match=r"^DataLoader: prefetch_factor must be a positive integer, got 0$"):
        DataLoader(ds, num_workers=1, prefetch_factor=0)
    with pytest.raises(ValueError, match=r"^DataLoader: unknown multiprocessing_context 'threads', expected one of "):
        iter(DataLoader(ds, num_workers=1, multiprocessing_context="threads"))
