"""All parameters as one flat vector and back (PyTorch's order: parameters in turn, each
flattened row-major).

    vec = nn.utils.parameters_to_vector(model.parameters())
    nn.utils.vector_to_parameters(vec * 0.5, model.parameters())
"""

import oneflow as flow


def _check_same_device(name, params):
    devices = {str(p.device) for p in params}
    if len(devices) > 1:
        raise RuntimeError(f"{name}: parameters are on different devices {sorted(devices)}; "
                           "move them to one device first")


def parameters_to_vector(parameters):
    if isinstance(parameters, flow.Tensor):
        raise TypeError("parameters_to_vector: expected an iterable of Tensors, got a single Tensor")
    params = list(parameters)
    for p in params:
        if not isinstance(p, flow.Tensor):
            raise TypeError(f"parameters_to_vector: expected Tensors, got {type(p).__name__}")
    if len(params) == 0:
        raise ValueError("parameters_to_vector: got no parameters")
    _check_same_device("parameters_to_vector", params)
    return flow.cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of vec into the parameters' data (not recorded by autograd)."""
    if not isinstance(vec, flow.Tensor):
        raise TypeError(f"vector_to_parameters: expected a Tensor as vec, got {type(vec).__name__}")
    if vec.dim() != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-dimensional, got shape {tuple(vec.shape)}")
    params = [parameters] if isinstance(parameters, flow.Tensor) else list(parameters)
    _check_same_device("vector_to_parameters", params)
    needed = sum(p.numel() for p in params)
    if vec.numel() != needed:
        raise ValueError(f"vector_to_parameters: vec has {vec.numel()} elements but the parameters "
                         f"have {needed}")
    pointer = 0
    with flow.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[pointer:pointer + n].reshape(tuple(p.shape)).to(p.dtype))
            pointer += n
