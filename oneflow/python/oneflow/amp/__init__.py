"""oneflow.amp: mixed precision, as torch.amp / torch.cuda.amp / torch.cpu.amp.

    with flow.autocast("cpu", dtype=flow.bfloat16):   # or flow.cpu.amp.autocast()
        loss = loss_fn(model(x), y)                    # linear/matmul/conv in bfloat16
    scaler = flow.amp.GradScaler()                     # float16 training: scale the loss
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()

The op policy (which ops run in the lower dtype, which in float32, which promote) is a table in
core/autocast.cc that every op call passes through, so C++ callers get it too. Parameters stay
float32: the casts are op calls, so their gradients come back in float32.
"""

import functools

import oneflow as flow
import oneflow._oneflow_internal as _C

_DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}


def _device_type(api, device_type):
    if not isinstance(device_type, str) or device_type not in _DEFAULT_DTYPE:
        raise ValueError(f"{api}: expected device_type 'cpu' or 'cuda', got {device_type!r}")
    return device_type


class autocast:
    """Context manager and decorator: ops on `device_type` tensors run under the autocast policy
    in `dtype` (default bfloat16 on cpu, float16 on cuda). Nests; restores the outer state."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _device_type("autocast", device_type)
        if dtype is None:
            dtype = getattr(flow, _DEFAULT_DTYPE[self.device])
        if dtype not in (flow.float16, flow.bfloat16):
            raise ValueError(f"autocast: expected dtype oneflow.float16 or oneflow.bfloat16, got {dtype}")
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled  # accepted for PyTorch's signature; casts are not cached

    def __enter__(self):
        self._prev = (_C.is_autocast_enabled(self.device), _C.get_autocast_dtype(self.device))
        _C.set_autocast_dtype(self.device, self.fast_dtype)
        _C.set_autocast_enabled(self.device, self._enabled)
        return self

    def __exit__(self, *exc):
        _C.set_autocast_enabled(self.device, self._prev[0])
        _C.set_autocast_dtype(self.device, self._prev[1])
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            # A fresh context per call: the decorated function may recurse or run on threads.
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)

        return wrapper


def is_autocast_enabled(device_type="cuda"):
    return _C.is_autocast_enabled(_device_type("is_autocast_enabled", device_type))


def get_autocast_dtype(device_type):
    return _C.get_autocast_dtype(_device_type("get_autocast_dtype", device_type))


class GradScaler:
    """Loss scaling for float16 training, with torch.cuda.amp.GradScaler's algorithm: scale() the
    loss, step() unscales the gradients and skips the update when one holds inf or NaN, update()
    backs the scale off on such steps and grows it after `growth_interval` clean ones. Works on
    cpu and cuda, and with global parameters (the inf check is a reduction over all ranks)."""

    _READY, _UNSCALED, _STEPPED = 0, 1, 2

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        # device: torch.amp.GradScaler's first argument; the scale is a number here, so the
        # scaler serves tensors on any device (flow.cuda.amp.GradScaler starts at init_scale).
        self.device = _device_type("GradScaler", device)
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    def _state(self, optimizer):
        # found_inf: False, or after unscale_ the device counts of non-finite gradient values
        # (a list, one per device) until step() or update() reads them.
        return self._per_optimizer.setdefault(id(optimizer), {"stage": self._READY, "found_inf": False})

    def scale(self, outputs):
        """outputs (a tensor or nested lists/tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, flow.Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError(f"GradScaler.scale: expected a tensor or a list/tuple of tensors, got {type(outputs).__name__}")

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale in place and records whether any is
        inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == self._UNSCALED:
            raise RuntimeError("GradScaler.unscale_: already called on this optimizer since the last update()")
        if state["stage"] == self._STEPPED:
            raise RuntimeError("GradScaler.unscale_: called after step(); call it before step()")
        inv_scale = 1.0 / self._scale
        # The inf check stays on the device: one count per device, summed there; step() reads
        # it once (the scaler's one host wait per step).
        bad = {}
        with flow.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = p.grad
                    n_bad = (~flow.isfinite(g)).to(flow.float32).sum()
                    if n_bad.is_global:
                        n_bad = n_bad.to_global(sbp=flow.sbp.broadcast).to_local()
                    key = str(n_bad.device)
                    bad[key] = n_bad if key not in bad else bad[key] + n_bad
                    g.mul_(inv_scale)
        state["found_inf"] = list(bad.values())
        state["stage"] = self._UNSCALED

    @staticmethod
    def _read_found_inf(state):
        """Whether the optimizer's gradients held inf or NaN: the host reads the device counts
        here, once per step (as torch's GradScaler.step reads found_inf with .item())."""
        found = state["found_inf"]
        if isinstance(found, list):
            found = any(float(n.item()) > 0 for n in found)
            state["found_inf"] = found
        return found

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless the gradients held inf or NaN (then None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("GradScaler.step: a closure is not supported while the scaler is enabled")
        state = self._state(optimizer)
        if state["stage"] == self._STEPPED:
            raise RuntimeError("GradScaler.step: already called on this optimizer since the last update()")
        if state["stage"] == self._READY:
            self.unscale_(optimizer)
        retval = None if self._read_found_inf(state) else optimizer.step(*args, **kwargs)
        state["stage"] = self._STEPPED
        return retval

    def update(self, new_scale=None):
        """Backs the scale off (times backoff_factor) if any step of this iteration found inf
        or NaN, grows it (times growth_factor) after growth_interval clean iterations in a row;
        or sets it to new_scale."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, flow.Tensor) else new_scale)
        else:
            found = [self._read_found_inf(s) for s in self._per_optimizer.values()
                     if s["stage"] != self._READY]
            if not found:
                raise RuntimeError("GradScaler.update: no inf checks were recorded prior to update(); call step() first")
            if any(found):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty, possibly saved "
                               "from a disabled GradScaler")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
