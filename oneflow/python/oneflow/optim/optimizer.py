"""Optimizer: the base class of oneflow.optim's optimizers, with PyTorch's param_groups and state
and OneFlow's update rules.

    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss.backward(); opt.step(); opt.zero_grad()
    ckpt = opt.state_dict()          # {"state": {index: {...}}, "param_groups": [...]}

Each step is one fused update op per parameter (core/optim.h) that reads the group's
hyper-parameters (learning rate times OneFlow's lr_scale, betas, weight decay, ...) and a step
count as 0-dim float64 tensors: the optimizer keeps those tensors and refills
them when a group's value changes (a scheduler, a user's edit), so nn.Graph's trace of step()
captures them like any state and a replay reads the new values. A subclass declares its update:

    _op = "adam_update"                     # the update op
    def _flags(self, group): ...            # the op's bool attrs
    def _state_names(self, group): ...      # state tensors, in the op's order
    def _hyper_values(self, group): ...     # {name: value} of the group's hyper-parameters
    def _init_state(self, group, p, state, zeros): ...   # make missing state tensors

Step counts are OneFlow's: one per optimizer, counting step() calls (a parameter that had no
gradient in some steps still sees the optimizer's count at its next update, where PyTorch counts
each parameter's own updates). The update op increments the count tensor it is given, so each
parameter keeps its own count tensor, set to the optimizer's count before an update when it fell
behind. state_dict() holds both forms: OneFlow's state["step"] (an int) and PyTorch's per
parameter "step"; load_state_dict takes either (PyTorch's: the largest per-parameter count).

Param-group keys: the optimizer's defaults, "params", OneFlow's "lr_scale" (nn.Graph only, as
OneFlow) and "clip_grad_max_norm"/"clip_grad_norm_type" (applied by clip_grad(), and by nn.Graph
before each update), and the schedulers' own ("initial_lr", ...); any other key is refused in
one line.
"""

import contextlib
import warnings

import oneflow as flow
from oneflow import _grads, _sharded_checkpoint
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


def _step_value_tensor(p, value):
    """A step count of any form (an int, PyTorch's float32 tensor) as the 0-dim float64 tensor
    the update ops count in."""
    return _scalar_like(p, _step_value(value))


def _step_value(value):
    """A step count of any form (an int, a tensor, global or local) as a float."""
    if isinstance(value, flow.Tensor):
        return (value.to_local() if value.is_global else value).item()
    return float(value)


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


# Param-group keys every optimizer takes besides its defaults: OneFlow's per-group lr_scale and
# gradient clipping, and the keys the schedulers and SWA keep in groups.
_USER_KEYS = {"params", "lr_scale", "clip_grad_max_norm", "clip_grad_norm_type"}
_GROUP_KEYS = _USER_KEYS | {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum",
                            "swa_lr"}


def _refuse_flags(name, **flags):
    """OneFlow's contiguous_params and fused: speed switches this build does not have."""
    for key, value in flags.items():
        if value:
            raise ValueError(f"{name}: {key}=True is not supported (the update is one fused op "
                             f"per parameter already); pass {key}=False")


def _place(t):
    return ("global", repr(t.placement)) if t.is_global else ("local", str(t.device))


def _scalar_like(t, value):
    """A 0-dim float64 tensor where t's update runs: t's device, or t's placement (broadcast)."""
    if t.is_global:
        return flow.full((), float(value), dtype=flow.float64, placement=t.placement,
                         sbp=[flow.sbp.broadcast] * len(t.placement.hierarchy))
    return flow.full((), float(value), dtype=flow.float64, device=t.device)


class Optimizer:
    _op = None  # the update op (core/optim.h); subclasses set it
    _counts_steps = True  # the op takes the parameter's step count before its hyper-parameters
    _state_aliases = {}  # state keys other writers use (OneFlow's) -> ours (PyTorch's)
    _elementwise = True  # the update reads each element alone (ZeRO may shard its state)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = _IdentityDict()  # per parameter: a dict of its buffers and counters
        self.param_groups = []

        if isinstance(params, flow.Tensor):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of Tensors or dicts, "
                "got a single Tensor"
            )
        self._hyper = {}  # (id(group), place) -> (group, {name: [value, 0-dim tensor]})
        # OneFlow's one count per optimizer: step() calls so far (None: after nn.Graph replays,
        # read back from the count tensors), and what each parameter's count tensor holds.
        self._step_count = 0
        self._param_counts = {}  # id(p) -> the value of state[p]["step"], where known
        param_groups = list(params)
        # An empty list is one group without parameters (as OneFlow accepts it).
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
        unknown = [k for k in param_group if k not in self.defaults and k not in _GROUP_KEYS]
        if unknown:
            raise ValueError(f"{name}: unknown param-group key {unknown[0]!r} (it takes "
                             f"{', '.join(sorted(set(self.defaults) | _USER_KEYS))})")
        if ("clip_grad_max_norm" in param_group) != ("clip_grad_norm_type" in param_group):
            raise ValueError(f"{name}: a param group needs both clip_grad_max_norm and "
                             f"clip_grad_norm_type to clip gradients, got only one")
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

    # ---- the update: one op per parameter, hyper-parameters as 0-dim tensors

    def _flags(self, group):
        return {}

    def _state_names(self, group):
        return []

    def _hyper_values(self, group):
        raise NotImplementedError(f"{type(self).__name__} does not declare its hyper-parameters")

    def _init_state(self, group, p, state, zeros):
        """Makes p's missing state tensors; zeros() gives one shaped (and laid out) like p."""

    _in_graph = False  # nn.Graph sets it while it prepares, traces or replays this optimizer

    @contextlib.contextmanager
    def _graph_mode(self):
        previous, self._in_graph = self._in_graph, True
        try:
            yield
        finally:
            self._in_graph = previous

    def _lr(self, group):
        """The group's learning rate; OneFlow's lr_scale multiplies it in nn.Graph only (eager
        OneFlow ignores it, and so does eager here, with a warning)."""
        scale = float(group.get("lr_scale", 1.0))
        if scale != 1.0 and not self._in_graph:
            if not getattr(self, "_warned_lr_scale", False):
                warnings.warn(f"{type(self).__name__}: lr_scale applies in nn.Graph only (as in "
                              f"OneFlow); this eager step uses the group's lr", UserWarning,
                              stacklevel=4)
                self._warned_lr_scale = True
            scale = 1.0
        return float(group["lr"]) * scale

    def _hypers(self, group, p):
        """The group's hyper-parameter tensors where p's update runs, each holding its current
        value (refilled when the group changed)."""
        key = (id(group), _place(p))
        entry = self._hyper.get(key)
        values = self._hyper_values(group)
        if entry is None or entry[0] is not group or entry[1].keys() != values.keys():
            entry = (group, {k: [v, _scalar_like(p, v)] for k, v in values.items()})
            self._hyper[key] = entry
        else:
            self._refill(entry, values)
        return [slot[1] for slot in entry[1].values()]

    @staticmethod
    def _refill(entry, values):
        with flow.no_grad():
            for k, v in values.items():
                slot = entry[1][k]
                if slot[0] != v:
                    slot[1].fill_(float(v))
                    slot[0] = v

    def _refresh_hypers(self):
        """Every hyper-parameter tensor made so far takes its group's current values (nn.Graph
        calls it before each replay)."""
        for entry in self._hyper.values():
            values = self._hyper_values(entry[0])
            if values.keys() == entry[1].keys():  # else the op changed: nn.Graph recompiles
                self._refill(entry, values)

    def _prepare(self, params_zeros):
        """State and hyper-parameter tensors made before a trace, so that nn.Graph's plan holds
        them. params_zeros: {id(p): zeros function} for parameters whose state is laid out
        otherwise (ZeRO's shards)."""
        count = self._count()
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.setdefault(p, {})
                zeros = params_zeros.get(id(p)) or (lambda p=p: flow.zeros_like(p))
                self._init_all(group, p, state, zeros)
                self._sync_step(p, state, count)
                self._hypers(group, p)
        # The plan's replays advance the count tensors on the device: read them back when needed.
        self._step_count, self._param_counts = None, {}

    def _init_all(self, group, p, state, zeros):
        self._init_state(group, p, state, zeros)
        if self._counts_steps:
            step = state.get("step")
            if step is None:
                state["step"] = _scalar_like(p, 0.0)
            elif not (isinstance(step, flow.Tensor) and step.dtype == flow.float64):
                state["step"] = _step_value_tensor(p, step)  # an int, or PyTorch's tensor

    def _count(self):
        """The optimizer's step count (before the step running now)."""
        if self._step_count is None:
            counts = [v["step"] for v in self.state.values()
                      if isinstance(v, dict) and isinstance(v.get("step"), flow.Tensor)]
            self._step_count = int(max((_step_value(t) for t in counts), default=0))
        return self._step_count

    def _sync_step(self, p, state, count):
        """Sets p's count tensor to the optimizer's count where it may differ from it (the
        host knows what each count tensor holds until nn.Graph's replays advance them)."""
        if not self._counts_steps:
            return
        if self._param_counts.get(id(p)) != count:
            with flow.no_grad():
                state["step"].fill_(float(count))
        self._param_counts[id(p)] = count + 1  # the update op increments it

    def _update(self, group, p, grad):
        state = self.state.setdefault(p, {})
        self._init_all(group, p, state, lambda: flow.zeros_like(p))
        tensors = [p, grad] + [state[k] for k in self._state_names(group)]
        if self._counts_steps:
            if not self._in_graph:  # nn.Graph: _prepare synced the counts before the trace
                self._sync_step(p, state, self._count())
            tensors.append(state["step"])
        tensors += self._hypers(group, p)
        flow._C.optim_update_(self._op, tensors, self._flags(group))

    def clip_grad(self, error_if_nonfinite=False):
        """OneFlow's per-group gradient clipping: each group with clip_grad_max_norm and
        clip_grad_norm_type has its gradients' total norm clipped to the max norm."""
        from oneflow.nn.utils.clip_grad import clip_grad_norm_

        for group in self.param_groups:
            if "clip_grad_max_norm" not in group:
                continue
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                clip_grad_norm_(params, group["clip_grad_max_norm"], group["clip_grad_norm_type"],
                                error_if_nonfinite)

    def _clips_grads(self):
        return any("clip_grad_max_norm" in g for g in self.param_groups)

    def _multi(self, group, params):
        """SGD's and Adam's parameters on one CUDA device and dtype: one multi-tensor op (one
        launch for many parameters, core/optim.h's MultiUpdate); other parameters, nn.Graph's
        trace and global tensors keep an op per parameter."""
        if len(params) < 2:
            for p in params:
                self._update(group, p, p.grad)
            return
        tensors = []
        for p in params:
            state = self.state.setdefault(p, {})
            self._init_all(group, p, state, lambda p=p: flow.zeros_like(p))
            tensors += [p, p.grad] + [state[k] for k in self._state_names(group)]
            if self._counts_steps:
                self._sync_step(p, state, self._count())  # (eager only: see _multi_key)
                tensors.append(state["step"])
        tensors += self._hypers(group, params[0])
        flow._C.optim_update_multi_(self._op, tensors, len(params), self._flags(group))

    def _multi_key(self, p):
        """The bucket of p's multi-tensor update, or None for an update of its own."""
        if (self._op not in ("sgd_update", "adam_update") or self._in_graph or p.is_global
                or p.device.type != "cuda" or not p.is_contiguous()
                or type(self)._update is not Optimizer._update):
            return None
        return (str(p.device), p.dtype)

    def step(self, closure=None):
        """One update of every parameter with a gradient (under no_grad)."""
        loss = self._run_closure(closure)
        count = None if self._in_graph else self._count()
        with flow.no_grad():
            for group in self.param_groups:
                buckets = {}
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    key = self._multi_key(p)
                    if key is None:
                        self._update(group, p, p.grad)
                    else:
                        buckets.setdefault(key, []).append(p)
                for params in buckets.values():
                    self._multi(group, params)
        if count is not None:
            self._step_count = count + 1  # every step() counts, as OneFlow's state["step"]
        return loss

    def zero_grad(self, set_to_none=True):
        _grads.zero_grads([p for group in self.param_groups for p in group["params"]],
                          set_to_none)

    def _run_closure(self, closure):
        # step() runs under no_grad; the closure recomputes the loss and needs autograd.
        if closure is None:
            return None
        with _grad_enabled(True):
            return closure()

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
        count = self._count()
        state = {}
        for p, value in self.state.items():
            if id(p) in index_of:
                if isinstance(value, dict) and isinstance(value.get("step"), flow.Tensor):
                    self._sync_step(p, value, count)  # PyTorch's per-parameter form
                    self._param_counts[id(p)] = count
                state[index_of[id(p)]] = value
        state["step"] = count  # OneFlow's form: one count per optimizer
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

        def cast(param, value, key=None):
            # Copies, so the loaded state does not alias the caller's dict; floating buffers
            # follow the parameter's dtype and device. A LazyTensor of a sharded checkpoint is
            # read in the parameter's layout (global: this rank's box only).
            value = _sharded_checkpoint.materialize_like(value, param)
            if key == "step" and isinstance(value, (flow.Tensor, int, float)):
                return _step_value_tensor(param, value)
            if isinstance(value, flow.Tensor):
                value = value.detach().clone()
                if is_floating(value.dtype) and is_floating(param.dtype):
                    value = value.to(param.dtype)
                return value.to(param._device)
            if isinstance(value, dict):
                return {self._state_aliases.get(k, k): cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = _IdentityDict()
        saved_state = dict(state_dict["state"])
        count = saved_state.pop("step", None)  # OneFlow's; else PyTorch's per-parameter counts
        if isinstance(count, flow.Tensor):
            count = _step_value(count)
        if count is None:
            count = max((_step_value(v["step"]) for v in saved_state.values()
                         if isinstance(v, dict) and "step" in v), default=0)
        for index, value in saved_state.items():
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
        self._hyper = {}  # the groups are new dicts: their tensors are made again
        self._step_count, self._param_counts = int(count), {}
