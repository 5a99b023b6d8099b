"""Datasets, samplers and the DataLoader, with the names and semantics of
``torch.utils.data`` (plus PaddlePaddle's ``DistributedBatchSampler``).

    from oneflow.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    for X, y in loader:
        ...
"""
from oneflow.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from oneflow.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
)
from oneflow.utils.data.distributed import DistributedBatchSampler, DistributedSampler
from oneflow.utils.data.collate import default_collate, default_convert
from oneflow.utils.data.dataloader import DataLoader, get_worker_info

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedBatchSampler",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
