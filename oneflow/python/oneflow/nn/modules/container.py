"""Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict.

    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))   # children "0", "1", "2"
    blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
    heads = nn.ModuleDict({"cls": nn.Linear(8, 10), "box": nn.Linear(8, 4)})
    scales = nn.ParameterList([nn.Parameter(flow.ones(8)) for _ in range(3)])   # "0", "1", "2"

Members are registered under their index or key, so parameters(), state_dict(), to() and
to_global() see them as they see attributes.
"""

import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

import oneflow as flow
from oneflow.nn.modules.module import Module
from oneflow.nn.parameter import Parameter


def _index(container, idx):
    """idx as a non-negative position, with PyTorch's IndexError text when out of range."""
    idx = operator.index(idx)
    size = len(container)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


class Sequential(Module):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(self, idx)]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[_index(self, idx)]
        setattr(self, key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, list(self._modules.keys())[_index(self, idx)])
        # Keep the keys "0".."n-1" so that indexing and state_dict names stay in step.
        modules = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(modules):
            self._modules[str(i)] = module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(self, idx))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(self, idx)), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, str(_index(self, idx)))
        modules = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(modules):
            self._modules[str(i)] = module

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)


def _pairs(name, values):
    """(key, value) pairs from a mapping or an iterable of pairs, with PyTorch's checks."""
    if isinstance(values, (Mapping, ModuleDict, ParameterDict)):
        return list(values.items())
    if not isinstance(values, Iterable) or isinstance(values, (str, flow.Tensor)):
        raise TypeError(f"{name}.update: expected a mapping or an iterable of key/value pairs, "
                        f"got {type(values).__name__}")
    pairs = []
    for i, item in enumerate(values):
        if not isinstance(item, Iterable) or isinstance(item, str):
            raise TypeError(f"{name}.update: element #{i} should be a (key, value) pair, got "
                            f"{type(item).__name__}")
        item = tuple(item)
        if len(item) != 2:
            raise ValueError(f"{name}.update: element #{i} has length {len(item)}; 2 is required")
        pairs.append(item)
    return pairs


class ModuleDict(Module):
    """An ordered dict of submodules registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        if key not in self._modules:
            raise KeyError(key)
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        if key not in self._modules:
            raise KeyError(key)
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, module in _pairs("ModuleDict", modules):
            self[key] = module


def _as_parameter(value):
    # A plain tensor becomes a Parameter (as in PyTorch); other objects are kept as they are.
    if isinstance(value, flow.Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters registered as "0", "1", ...; plain tensors become Parameters."""

    def __init__(self, values=None):
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def _key(self, idx):
        return str(_index(self, idx))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(len(self))[idx]])
        return getattr(self, self._key(idx))

    def __setitem__(self, idx, param):
        key = self._key(idx)
        param = _as_parameter(param)
        if key in self._parameters and not isinstance(param, Parameter) and param is not None:
            del self._parameters[key]  # the slot now holds a non-tensor object
        setattr(self, key, param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def append(self, value):
        object.__setattr__(self, "_size", self._size + 1)
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, Iterable) or isinstance(values, flow.Tensor):
            raise TypeError(f"ParameterList.extend: expected an iterable of parameters, got "
                            f"{type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        lines = []
        for i in range(len(self)):
            p = self[i]
            if isinstance(p, flow.Tensor):
                size = "x".join(str(d) for d in p.shape)
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({i}): {kind} containing: [{p.dtype} of size {size}]")
            else:
                lines.append(f"  ({i}): Object of type: {type(p).__name__}")
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called")


class ParameterDict(Module):
    """An ordered dict of parameters registered under their keys; plain tensors become
    Parameters."""

    def __init__(self, parameters=None):
        super().__init__()
        object.__setattr__(self, "_keys", {})
        if parameters is not None:
            self.update(parameters)

    def _check_key(self, key):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._check_key(key)
        value = _as_parameter(value)
        if key in self._parameters and not isinstance(value, Parameter) and value is not None:
            del self._parameters[key]
        setattr(self, key, value)
        self._keys[key] = None

    def __delitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        key = list(self._keys)[-1]
        return key, self.pop(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def update(self, parameters):
        for key, value in _pairs("ParameterDict", parameters):
            self[key] = value

    def __or__(self, other):
        copy = self.copy()
        copy.update(other)
        return copy

    def __ror__(self, other):
        copy = other.copy()
        copy.update(self)
        return copy

    def __ior__(self, other):
        self.update(other)
        return self

    def extra_repr(self):
        lines = []
        for k in self._keys:
            p = self[k]
            if isinstance(p, flow.Tensor):
                size = "x".join(str(d) for d in p.shape)
                kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
                lines.append(f"  ({k}): {kind} containing: [{p.dtype} of size {size}]")
            else:
                lines.append(f"  ({k}): Object of type: {type(p).__name__}")
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called")
