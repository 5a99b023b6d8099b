"""Turning a list of samples into a batch, with PyTorch's rules:

* tensors              -> ``flow.stack(batch, 0)``
* numpy arrays/scalars -> one tensor, stacked
* Python ints          -> int64 tensor; Python floats -> float64 tensor
* Python bools         -> int64 0/1 tensor (PyTorch: bool tensor)
* str / bytes          -> left as a list
* dicts                -> dict of collated values, key by key
* namedtuples          -> namedtuple of collated fields
* tuples / lists       -> list of collated positions (``[X, y]`` for ``(x, y)`` samples)
"""
import collections.abc

import oneflow as flow


def _is_numpy(value):
    # Checked by module name so that numpy is never imported just to collate.
    return type(value).__module__ == "numpy"


def _numpy_to_tensor(value):
    import numpy as np

    array = np.asarray(value)
    if array.dtype.kind in "OSUV":  # object, bytes, unicode, void
        raise TypeError(
            f"default_collate: numpy arrays of dtype {array.dtype} cannot become tensors; "
            "only numeric and bool arrays can"
        )
    return flow.tensor(array)


def default_convert(data):
    """Converts one sample (used when batching is off, ``batch_size=None``):
    numpy arrays become tensors, containers are converted element-wise, and
    everything else is returned unchanged."""
    if isinstance(data, flow.Tensor):
        return data
    if _is_numpy(data):
        import numpy as np

        if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
            return flow.tensor(data)
        return data
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Merges a list of samples into a batch (see the module docstring)."""
    if not isinstance(batch, collections.abc.Sequence):
        raise TypeError(f"default_collate: batch must be a list of samples, got {type(batch).__name__}")
    if len(batch) == 0:
        raise ValueError("default_collate: batch must hold at least one sample, got an empty list")
    elem = batch[0]
    if isinstance(elem, flow.Tensor):
        return flow.stack(list(batch), 0)
    if _is_numpy(elem):
        import numpy as np

        if isinstance(elem, (np.ndarray, np.generic)) and not isinstance(elem, (np.str_, np.bytes_)):
            # One conversion for the whole batch instead of one per sample.
            return _numpy_to_tensor(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, bool):
        # bool is an int subclass. PyTorch would make a bool tensor; int64 0/1
        # is used here so that collating flags needs no bool dtype support.
        return flow.tensor([int(b) for b in batch], dtype=flow.int64)
    if isinstance(elem, int):
        return flow.tensor(list(batch), dtype=flow.int64)
    if isinstance(elem, float):
        return flow.tensor(list(batch), dtype=flow.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(field)) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        sizes = {len(sample) for sample in batch}
        if len(sizes) != 1:
            raise RuntimeError(
                f"default_collate: each sample in the batch must have the same number of elements, "
                f"got lengths {sorted(sizes)}"
            )
        return [default_collate(list(position)) for position in zip(*batch)]
    raise TypeError(
        "default_collate: samples must be tensors, numpy arrays, numbers, str, dicts or lists, "
        f"got {type(elem).__name__}"
    )
