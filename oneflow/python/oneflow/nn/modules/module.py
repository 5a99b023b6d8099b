"""Module: the base class of layers and models, with PyTorch's registration rules.

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)          # a submodule: its parameters become "fc.weight", ...
        def forward(self, x):
            return self.fc(x)
"""

from collections import OrderedDict, namedtuple

import oneflow as flow
from oneflow import _grads, _sharded_checkpoint
from oneflow._dtype_util import is_floating
from oneflow.nn.modules import _assignments, _materialize
from oneflow.nn.parameter import Parameter

def _addindent(text, num_spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """Returned by register_*_hook; remove() unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks_dict):
        self._hooks_dict = hooks_dict
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        self._hooks_dict.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


# Who sees module calls while a trace runs: oneflow.fx's tracer (fx/tracer.py; the calls become
# graph nodes instead of running forward) and nn.Graph's (nn/graph/tracing.py; it names the
# plan's scope, moves pipeline-stage inputs, recomputes checkpointed modules). The last one
# appended gets hook(module, args, kwargs); call_eagerly(module, args, kwargs) runs the call as
# eager does (its forward's own module calls still reach the hook).
_module_call_hooks = []
_run_eagerly = []  # the module whose next call skips the hook (call_eagerly)


def call_eagerly(module, args, kwargs):
    """From inside a module-call hook: module's call as eager runs it (pre-hooks, forward,
    hooks)."""
    _run_eagerly.append(module)
    try:
        return module(*args, **kwargs)
    finally:
        if _run_eagerly and _run_eagerly[-1] is module:
            _run_eagerly.pop()  # a __call__ override that never reached Module.__call__


class Module:
    training: bool

    def __init__(self):
        # object.__setattr__ because our __setattr__ reads these dicts.
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    # ---- calling ----

    def __call__(self, *args, **kwargs):
        if _module_call_hooks:
            if _run_eagerly and _run_eagerly[-1] is self:
                _run_eagerly.pop()
            else:
                return _module_call_hooks[-1](self, args, kwargs)
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_pre_hook(self, hook):
        """hook(module, args) -> None or new args; runs before forward."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook):
        """hook(module, args, output) -> None or a new output; runs after forward."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    # ---- registration ----

    def _check_new_name(self, kind, name):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got "{name}"')

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_new_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(oneflow.nn.Parameter or None required)"
            )
        if param is not None and not param.is_leaf:
            raise ValueError(
                f"cannot assign non-leaf Tensor to parameter '{name}'; "
                "make it a leaf with .detach() first"
            )
        self._parameters[name] = param
        _assignments.bump()

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, flow.Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(oneflow.Tensor or None required)"
            )
        self._buffers[name] = tensor
        _assignments.bump()
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_new_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module
        _assignments.bump()

    register_module = add_module

    def get_submodule(self, target):
        """The submodule at a dotted path such as "features.0"."""
        module = self
        if target == "":
            return module
        for item in target.split("."):
            if item not in module._modules:
                raise AttributeError(f"{module._get_name()} has no submodule `{item}` (in '{target}')")
            module = module._modules[item]
        return module

    def __getattr__(self, name):
        # Only called when normal lookup fails: parameters, buffers and submodules live in dicts.
        d = self.__dict__
        for kind in ("_parameters", "_buffers", "_modules"):
            members = d.get(kind)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        def remove_from(*dicts_or_sets):
            for d in dicts_or_sets:
                if name in d:
                    if isinstance(d, dict):
                        del d[name]
                    else:
                        d.discard(name)

        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(self.__dict__, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(oneflow.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
            return
        modules = self.__dict__.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(self.__dict__, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
            _assignments.bump()
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(oneflow.nn.Module or None expected)"
                )
            modules[name] = value
            _assignments.bump()
            return
        buffers = self.__dict__.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, flow.Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(oneflow.Tensor or None expected)"
                )
            buffers[name] = value
            _assignments.bump()
            return
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)
            return
        _assignments.bump()

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[:1].isdigit())

    # ---- iteration ----

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        # Shared tensors (tied weights) are reported once; identity, not ==, decides.
        seen = set()
        if recurse:
            modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            modules = [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (module_prefix + ("." if module_prefix else "") + name, value)

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub_prefix, remove_duplicate)

    # ---- state dict ----

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name; the tensors share storage."""
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys, error_msgs,
                              copies):
        """Checks this module's entries of state_dict; appends (param, value) to copies."""
        local_state = {k: v for k, v in self._parameters.items() if v is not None}
        for k, v in self._buffers.items():
            if v is not None and k not in self._non_persistent_buffers_set:
                local_state[k] = v

        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            input_param = state_dict[key]
            # A LazyTensor of a sharded checkpoint (oneflow.load of a directory in a job of
            # several ranks) is read when copied, in the layout of param.
            lazy = getattr(input_param, "_is_lazy_checkpoint_tensor", False)
            if type(input_param).__module__ == "numpy" and hasattr(input_param, "shape"):
                # numpy arrays are accepted, as in OneFlow (converted to the parameter's dtype)
                input_param = flow.tensor(input_param, dtype=param.dtype)
            elif not isinstance(input_param, flow.Tensor) and not lazy:
                error_msgs.append(
                    f"expected a oneflow.Tensor or numpy array for {key}, "
                    f"got {type(input_param).__name__}"
                )
                continue
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(
                    f"size mismatch for {key}: checkpoint has shape {tuple(input_param.shape)}, "
                    f"model has shape {tuple(param.shape)}"
                )
                continue
            copies.append((key, param, input_param))

        for key in state_dict.keys():
            if key.startswith(prefix):
                # The first name after the prefix is a param, a buffer or a child module.
                first = key[len(prefix):].split(".", 1)[0]
                if first not in self._modules and first not in local_state:
                    unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True):
        """Copies the tensors of state_dict into this module's parameters and buffers in place.

        Returns (missing_keys, unexpected_keys). With strict, any of these is an error; a
        shape mismatch is an error either way. Every entry is checked before any is copied.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(
                f"{self._get_name()}.load_state_dict: expected a dict-like state_dict, "
                f"got {type(state_dict).__name__}"
            )
        missing_keys, unexpected_keys, error_msgs, copies = [], [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, missing_keys, unexpected_keys,
                                         error_msgs, copies)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        load(self, "")
        if strict:
            problems = []
            if missing_keys:
                problems.append(f"missing keys {missing_keys}")
            if unexpected_keys:
                problems.append(f"unexpected keys {unexpected_keys}")
            error_msgs = problems + error_msgs
        if error_msgs:
            # Raised before anything is copied: a failed load leaves the model as it was.
            raise RuntimeError(f"{self._get_name()}.load_state_dict: " + "; ".join(error_msgs))
        with flow.no_grad():
            for key, param, value in copies:
                try:
                    param.copy_(_sharded_checkpoint.materialize_like(value, param))
                except Exception as ex:
                    raise RuntimeError(
                        f"{self._get_name()}.load_state_dict: copying {key} failed: {ex}"
                    ) from None
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ---- modes, devices, dtypes ----

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError(f"{self._get_name()}.train: mode must be a bool, got {type(mode).__name__}")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        _grads.zero_grads(self.parameters(), set_to_none)

    def apply(self, fn):
        """Calls fn on every submodule (children first) and then on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        for module in self.children():
            module._apply(fn)
        with flow.no_grad():
            for param in self._parameters.values():
                if param is None:
                    continue
                # Replace the data, not the object: optimizers hold these Parameters.
                param.data = fn(param.data)
                if param.grad is not None:
                    param.grad = fn(param.grad)
            for key, buf in self._buffers.items():
                if buf is not None:
                    self._buffers[key] = fn(buf)
                    _assignments.bump()
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype) or to(tensor); dtype casts floating tensors only."""
        if args and isinstance(args[0], type) and args[0].__name__ == "GraphModule":
            from oneflow.nn.graph_module import GraphModule

            return GraphModule(self)
        if len(args) == 1 and not kwargs and isinstance(args[0], type) and \
                issubclass(args[0], Module) and isinstance(self, args[0]):
            # OneFlow's graph code reads `self.m.to(nn.Module)` for the module behind its proxy;
            # outside a proxy that is the module itself
            return self
        device, dtype = _parse_to_args(self._get_name(), args, kwargs)

        def convert(t):
            if device is not None:
                t = t.to(device)
            if dtype is not None and is_floating(t.dtype):
                t = t.to(dtype)
            return t

        return self._apply(convert)

    def to_global(self, placement=None, sbp=None, *, init=None):
        """Makes every parameter and buffer global (the OneFlow tutorial: model on
        flow.sbp.broadcast, data on flow.sbp.split(0)); Parameters keep their identity. A module
        built on the meta device (with flow.device("meta"): ...) is materialised shard by shard
        and initialised by its modules' reset_parameters() or init(module); its sbp may be a
        function of each tensor's qualified name (_materialize)."""
        if _materialize.has_meta(self):
            return _materialize.to_global(self, placement, sbp, init)
        if init is not None or _materialize.is_sbp_fn(sbp):
            raise ValueError("to_global: init= and an sbp function apply to a module on the meta "
                             "device; this module holds no meta tensors")
        return self._apply(lambda t: t.to_global(placement=placement, sbp=sbp))

    def to_empty(self, *, device):
        """Every parameter and buffer as uninitialised memory of its shape and dtype on device
        (PyTorch's, for a module built on the meta device)."""
        return _materialize.to_empty(self, device)

    to_consistent = to_global

    def to_local(self):
        """Makes every global parameter and buffer local: each rank keeps its own shard (OneFlow's
        Module.to_local); local ones stay as they are."""
        return self._apply(lambda t: t.to_local() if t.is_global else t)

    def cpu(self):
        return self._apply(lambda t: t.to("cpu"))

    def cuda(self, device=None):
        target = "cuda" if device is None else f"cuda:{device}"
        return self._apply(lambda t: t.to(target))

    def _cast_floating(self, dtype):
        return self._apply(lambda t: t.to(dtype) if is_floating(t.dtype) else t)

    def float(self):
        return self._cast_floating(flow.float32)

    def double(self):
        return self._cast_floating(flow.float64)

    def half(self):
        return self._cast_floating(flow.float16)

    def bfloat16(self):
        return self._cast_floating(flow.bfloat16)

    # ---- printing ----

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside the parentheses of this module's repr; layers override it."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            "(" + key + "): " + _addindent(repr(module), 2) for key, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _is_device(arg):
    # flow.device may be a class or a factory function; a device always prints as "cpu", "cuda:0"...
    if isinstance(arg, str):
        return True
    if isinstance(flow.device, type):
        return isinstance(arg, flow.device)
    return type(arg).__name__ == "device"


def _parse_to_args(name, args, kwargs):
    """(device, dtype) from Module.to's arguments; either may be None."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"{name}.to: unexpected keyword arguments {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, flow.Tensor):
            device, dtype = arg._device, arg.dtype
        elif isinstance(arg, flow.dtype):
            dtype = arg
        elif _is_device(arg):
            device = arg
        elif isinstance(arg, bool):  # non_blocking given positionally
            continue
        else:
            raise TypeError(
                f"{name}.to: expected a device, a dtype or a tensor, got {type(arg).__name__}"
            )
    if dtype is not None and not is_floating(dtype):
        raise TypeError(f"{name}.to only accepts floating point dtypes, but got desired dtype={dtype}")
    return device, dtype
