"""Optimizer: the base class of SGD, Adam and AdamW, with PyTorch's param_groups and state.

    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss.backward(); opt.step(); opt.zero_grad()
    ckpt = opt.state_dict()          # {"state": {index: {...}}, "param_groups": [...]}
"""

import contextlib
import warnings

import oneflow as flow
from oneflow import _sharded_checkpoint
from oneflow._dtype_util import is_floating


class _RequiredParameter:
    """The default of a hyper-parameter every group must give (SGD's lr in PyTorch)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class _IdentityDict:
    """The optimizer's per-parameter state: a defaultdict(dict) keyed by tensor identity.

    Tensors compare elementwise, so they cannot be ordinary dict keys; this keys on id() and
    keeps the tensor alive next to its value. Keys that are not tensors (from a loaded state
    dict that matched no parameter) are kept the same way. As in PyTorch, reading the state
    of a parameter that has none gives (and stores) an empty dict.
    """

    def __init__(self):
        self._items = {}  # id(key) -> (key, value)

    def __getitem__(self, key):
        return self.setdefault(key, {})

    def __setitem__(self, key, value):
        self._items[id(key)] = (key, value)

    def __delitem__(self, key):
        del self._items[id(key)]

    def pop(self, key, *default):
        if id(key) in self._items:
            return self._items.pop(id(key))[1]
        if default:
            return default[0]
        raise KeyError(key)

    def __contains__(self, key):
        return id(key) in self._items

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return (key for key, _ in self._items.values())

    def keys(self):
        return list(self)

    def values(self):
        return [value for _, value in self._items.values()]

    def items(self):
        return list(self._items.values())

    def get(self, key, default=None):
        item = self._items.get(id(key))
        return default if item is None else item[1]

    def setdefault(self, key, default):
        if id(key) not in self._items:
            self._items[id(key)] = (key, default)
        return self._items[id(key)][1]

    def __reduce__(self):
        # ids change when the keys are copied or unpickled; rebuild from the pairs.
        return (_identity_dict_from_items, (self.items(),))


def _identity_dict_from_items(items):
    d = _IdentityDict()
    for key, value in items:
        d[key] = value
    return d


@contextlib.contextmanager
def _grad_enabled(enabled):
    previous = flow.is_grad_enabled()
    flow.set_grad_enabled(enabled)
    try:
        yield
    finally:
        flow.set_grad_enabled(previous)


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = _IdentityDict()  # per parameter: a dict of its buffers and counters
        self.param_groups = []

        if isinstance(params, flow.Tensor):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of Tensors or dicts, "
                "got a single Tensor"
            )
        param_groups = list(params)
        # An empty list is one group without parameters, as in OneFlow (a step does nothing).
        if len(param_groups) == 0 or not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"\n    {key}: {group[key]}"
        return text + "\n)"

    def add_param_group(self, param_group):
        """Adds a dict with "params" and optional per-group hyper-parameters."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: a param group must be a dict, got {type(param_group).__name__}")
        param_group = dict(param_group)
        params = param_group["params"]
        if isinstance(params, flow.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                f"{name}: parameters must be an ordered collection (their order decides the "
                "state_dict indices); got a set, use a list"
            )
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, flow.Tensor):
                raise TypeError(
                    f"{name} can only optimize Tensors, but one of the params is {type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor")
        param_group["params"] = params

        for key, default in self.defaults.items():
            if default is required and key not in param_group:
                raise ValueError(
                    f"{name}: parameter group didn't specify a value of required optimization "
                    f"parameter {key}"
                )
            param_group.setdefault(key, default)

        ids = [id(p) for p in params]
        if len(ids) != len(set(ids)):
            warnings.warn(f"{name}: a parameter group contains duplicate parameters", stacklevel=3)
        existing = {id(p) for group in self.param_groups for p in group["params"]}
        if existing.intersection(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with flow.no_grad():
                        p.grad.zero_()

    def _run_closure(self, closure):
        # step() runs under no_grad; the closure recomputes the loss and needs autograd.
        if closure is None:
            return None
        with _grad_enabled(True):
            return closure()

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def state_dict(self):
        """{"state": {index: state}, "param_groups": [...]}, parameters replaced by their index
        in the order of the groups, as PyTorch does."""
        index_of = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index_of.setdefault(id(p), len(index_of))
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            groups.append(packed)
        # State of tensors that are no longer in any group is dropped, as it has no index.
        state = {index_of[id(p)]: value for p, value in self.state.items() if id(p) in index_of}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        name = type(self).__name__
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{name}.load_state_dict: the state dict has {len(saved_groups)} parameter groups, "
                f"the optimizer has {len(self.param_groups)}"
            )
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(
                    f"{name}.load_state_dict: parameter group {i} has {len(saved['params'])} "
                    f"parameters in the state dict and {len(group['params'])} in the optimizer"
                )

        param_of = {}
        for group, saved in zip(self.param_groups, saved_groups):
            for index, p in zip(saved["params"], group["params"]):
                param_of[index] = p

        def cast(param, value):
            # Copies, so the loaded state does not alias the caller's dict; floating buffers
            # follow the parameter's dtype and device. A LazyTensor of a sharded checkpoint is
            # read in the parameter's layout (global: this rank's box only).
            value = _sharded_checkpoint.materialize_like(value, param)
            if isinstance(value, flow.Tensor):
                value = value.detach().clone()
                if is_floating(value.dtype) and is_floating(param.dtype):
                    value = value.to(param.dtype)
                return value.to(param._device)
            if isinstance(value, dict):
                return {k: cast(param, v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = _IdentityDict()
        for index, value in state_dict["state"].items():
            if index in param_of:
                param = param_of[index]
                state[param] = cast(param, value)
            else:
                state[index] = value

        new_groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            new_group = dict(saved)
            new_group["params"] = group["params"]
            new_groups.append(new_group)
        self.state = state
        self.param_groups = new_groups
