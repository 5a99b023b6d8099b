"""Pruning a module's tensors by masks, as OneFlow's oneflow.nn.utils.prune (torch.nn.utils.prune).

    import oneflow.nn.utils.prune as prune
    prune.l1_unstructured(model.fc, name="weight", amount=0.3)   # 30% smallest |w| -> 0
    prune.ln_structured(model.conv, "weight", amount=2, n=2, dim=0)
    prune.remove(model.fc, "weight")                             # make it permanent

Pruning `name` moves the parameter to `name + "_orig"`, registers the buffer `name + "_mask"`
and recomputes `name = orig * mask` before each forward (a forward pre-hook, the pruning
method itself). Pruning again combines the masks in a PruningContainer: the new method acts
only on the units the previous masks kept.
"""

import numbers
from abc import ABC, abstractmethod

from oneflow import _creation, _grad_mode, _index_api, _math_api, _ops, _random
from oneflow._oneflow_internal import Tensor

__all__ = [
    "BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured", "L1Unstructured",
    "RandomStructured", "LnStructured", "CustomFromMask", "identity", "random_unstructured",
    "l1_unstructured", "random_structured", "ln_structured", "global_unstructured",
    "custom_from_mask", "remove", "is_pruned",
]


class BasePruningMethod(ABC):
    """A pruning method: compute_mask(t, default_mask) gives the new mask; as a forward
    pre-hook it sets module.<name> = <name>_orig * <name>_mask."""

    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask for t, given default_mask (the masks of earlier prunings)."""

    def apply_mask(self, module):
        assert self._tensor_name is not None, f"{type(self).__name__}: no tensor name set"
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return orig * mask.to(dtype=orig.dtype)

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prunes module.<name> with cls(*args, **kwargs), combined with earlier prunings."""
        old = None
        hooks = [(k, h) for k, h in module._forward_pre_hooks.items()
                 if isinstance(h, BasePruningMethod) and h._tensor_name == name]
        if len(hooks) > 1:
            raise ValueError(f"prune: more than one pruning hook for {name!r} of {module}")
        if hooks:
            key, old = hooks[0]
            del module._forward_pre_hooks[key]

        method = cls(*args, **kwargs)
        method._tensor_name = name
        if old is not None:
            container = old if isinstance(old, PruningContainer) else PruningContainer(old)
            container.add_pruning_method(method)
            method = container

        orig = getattr(module, name)
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            raise ValueError(f"prune: importance_scores of shape {tuple(importance_scores.shape)} "
                             f"must match {name} of shape {tuple(orig.shape)}")
        if old is None:
            # first pruning: the parameter becomes <name>_orig
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = _creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()

        scores = importance_scores if importance_scores is not None else orig
        try:
            mask = method.compute_mask(scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if old is None:  # undo the renaming
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t with this method's mask applied (module-free use)."""
        scores = importance_scores if importance_scores is not None else t
        mask = self.compute_mask(scores, default_mask if default_mask is not None
                                 else _creation.ones_like(t))
        return t * mask

    def remove(self, module):
        """Makes the pruning permanent: <name> becomes a parameter holding orig * mask."""
        assert self._tensor_name is not None, f"{type(self).__name__}: no tensor name set"
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        with _grad_mode.no_grad():
            orig.copy_(weight.detach())
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        module.register_parameter(self._tensor_name, orig)


class PruningContainer(BasePruningMethod):
    """Pruning methods applied one after another to the same tensor."""

    def __init__(self, *args):
        self._pruning_methods = tuple()
        if len(args) == 1 and not isinstance(args[0], (list, tuple)):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        elif len(args) == 1:
            for method in args[0]:
                self.add_pruning_method(method)
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"PruningContainer: {type(method).__name__} is not a pruning method")
        if method is not None and getattr(self, "_tensor_name", None) != method._tensor_name:
            raise ValueError(f"PruningContainer: can only add methods for tensor "
                             f"{getattr(self, '_tensor_name', None)!r}; got one for "
                             f"{method._tensor_name!r}")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask computed on the units the earlier masks kept."""
        method = self._pruning_methods[-1]
        if method.PRUNING_TYPE == "unstructured":
            kept = default_mask == 1
            new_partial = method.compute_mask(t[kept], default_mask=default_mask[kept])
            mask = default_mask.clone()
            mask[kept] = new_partial.to(dtype=mask.dtype)
            return mask
        if method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError("PruningContainer: a structured method needs a dim")
            dim = method.dim % t.dim()
            others = [d for d in range(t.dim()) if d != dim]
            # channels with any unit kept
            kept_channels = (default_mask.sum(dim=others) != 0) if others else default_mask != 0
            index = _ops.nonzero(kept_channels).reshape(-1)
            partial_t = _ops.index_select(t, dim, index)
            partial_mask = _ops.index_select(default_mask, dim, index)
            new_partial = method.compute_mask(partial_t, default_mask=partial_mask)
            mask = default_mask.clone()
            full = _creation.zeros_like(default_mask)
            full = full.index_add(dim, index, new_partial.to(dtype=full.dtype)) \
                if hasattr(full, "index_add") else _scatter_channels(full, dim, index, new_partial)
            return mask * full
        if method.PRUNING_TYPE == "global":
            return method.compute_mask(t, default_mask) * default_mask
        raise ValueError(f"PruningContainer: unknown PRUNING_TYPE {method.PRUNING_TYPE!r}")


def _scatter_channels(full, dim, index, values):
    for j, i in enumerate(index.tolist()):
        src = values.narrow(dim, j, 1)
        idx = [slice(None)] * full.dim()
        idx[dim] = slice(i, i + 1)
        full[tuple(idx)] = src
    return full


class Identity(BasePruningMethod):
    """Prunes nothing (a mask of ones)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _unstructured_mask(t, default_mask, amount, scores, largest):
    """default_mask with the k units of t whose scores() rank first (largest or smallest) set to
    0, k from amount; scores is called only when something is pruned (random draws included)."""
    size = t.nelement()
    k = _compute_nparams_toprune(amount, size)
    _validate_pruning_amount(k, size)
    mask = default_mask.clone()
    if k != 0:
        drop = _index_api.topk(scores().reshape(-1), k, largest=largest).indices
        flat = mask.reshape(-1)
        flat[drop] = 0
        mask = flat.reshape(*t.shape)
    return mask


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` units (a count, or a fraction) chosen at random."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _unstructured_mask(t, default_mask, self.amount,
                                  lambda: _random.rand(*t.shape), largest=True)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` units of smallest absolute value."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        return _unstructured_mask(t, default_mask, self.amount, t.abs, largest=False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channel_mask(t, dim, keep_channels):
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    return keep_channels.reshape(shape).expand(*t.shape)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` whole channels along `dim`, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        n = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, n)
        _validate_pruning_amount(k, n)
        if k == 0:
            return default_mask.clone()
        keep = _creation.zeros(n)
        keep[_index_api.topk(_random.rand(n), n - k).indices] = 1
        return _channel_mask(t, self.dim % t.dim(), keep).to(default_mask.dtype) * default_mask

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(BasePruningMethod):
    """Prunes the `amount` channels along `dim` of smallest L`n` norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, size)
        keep_count = size - k
        _validate_pruning_amount(k, size)
        dim = self.dim % t.dim()
        norm = _compute_norm(t, self.n, dim)
        keep = _creation.zeros(size)
        if keep_count:
            keep[_index_api.topk(norm, keep_count).indices] = 1
        return _channel_mask(t, dim, keep).to(default_mask.dtype) * default_mask

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes by a given mask."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"CustomFromMask: mask of shape {tuple(self.mask.shape)} does not "
                             f"match the tensor's {tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prunes (module, name) pairs together: the method's mask is computed over all of them as
    one flat tensor, then split back."""
    if not hasattr(parameters, "__iter__") or isinstance(parameters, (str, Tensor)):
        raise TypeError("global_unstructured: parameters must be an iterable of "
                        "(module, name) pairs")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured: importance_scores must be a dict")
    scores = _ops.cat([importance_scores.get((m, n), getattr(m, n)).reshape(-1)
                       for m, n in parameters])
    masks = [getattr(m, n + "_mask", _creation.ones_like(getattr(m, n))).reshape(-1)
             for m, n in parameters]
    default_mask = _ops.cat(masks)
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f"global_unstructured: only unstructured methods, got "
                        f"{pruning_method.__name__} ({method.PRUNING_TYPE})")
    container.add_pruning_method(method)
    final = container.compute_mask(scores, default_mask)
    at = 0
    for module, name in parameters:
        n = getattr(module, name).nelement()
        custom_from_mask(module, name, mask=final[at:at + n].reshape(getattr(module, name).shape))
        at += n


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Makes the pruning of module.<name> permanent and removes its hook."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"prune.remove: parameter {name!r} of {module} has to be pruned before "
                     f"pruning can be removed")


def is_pruned(module):
    """Whether module or one of its submodules has a pruning hook."""
    for _, sub in module.named_modules():
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


def _validate_pruning_amount_init(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"prune: invalid type for amount: {amount!r}; must be int or float")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"prune: amount={amount} should be a float in [0, 1] or a "
                         f"non-negative integer")


def _validate_pruning_amount(amount, tensor_size):
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"prune: amount={amount} should be smaller than the number of "
                         f"parameters to prune={tensor_size}")


def _validate_structured_pruning(t):
    if t.dim() <= 1:
        raise ValueError(f"prune: structured pruning needs a tensor of at least 2 dims, got "
                         f"shape {tuple(t.shape)}")


def _compute_nparams_toprune(amount, tensor_size):
    _validate_pruning_amount(amount, tensor_size)
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(t, dim):
    if dim >= t.dim():
        raise IndexError(f"prune: invalid index {dim} for tensor of size {tuple(t.shape)}")


def _compute_norm(t, n, dim):
    dims = [d for d in range(t.dim()) if d != dim]
    return _math_api.vector_norm(t, ord=n, dim=dims)
