"""oneflow.utils.tensor: exchanging tensors with PyTorch, as OneFlow's from_torch / to_torch.

    t = torch.rand(2, 3)
    x = flow.utils.tensor.from_torch(t)      # same values, dtype and shape
    back = flow.utils.tensor.to_torch(x)

Both copy the values through host memory (OneFlow shares the buffer through DLPack; this
build does not share memory with another library): a write to one is not seen by the other.
Only CPU tensors are exchanged; a CUDA tensor is refused in one line.
"""

__all__ = ["from_torch", "to_torch"]


def from_torch(torch_tensor):
    from oneflow import _creation

    if getattr(torch_tensor, "is_cuda", False):
        raise ValueError("from_torch: only CPU tensors are exchanged; move it with .cpu() first")
    return _creation.tensor(torch_tensor.detach().numpy())


def to_torch(flow_tensor):
    import torch

    if getattr(flow_tensor, "is_cuda", False):
        raise ValueError("to_torch: only CPU tensors are exchanged; move it with .cpu() first")
    return torch.from_numpy(flow_tensor.detach().numpy().copy())
