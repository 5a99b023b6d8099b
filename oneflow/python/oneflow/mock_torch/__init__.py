"""oneflow.mock_torch: make ``import torch`` give oneflow, so PyTorch scripts run unchanged.

    import oneflow.mock_torch as mock
    mock.enable()                 # from here on: import torch -> oneflow
    import torch, torchvision     # oneflow and flowvision, under PyTorch's names
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from safetensors.torch import save_file, load_file
    mock.disable()                # the real packages (if installed) again

    with mock.enable():           # the same, for a block
        import torch

For a whole command (every process it starts included, e.g. the launcher's ranks):

    eval $(python3 -m oneflow.mock_torch)     # prints: export ... PYTHONPATH=<stubs>:$PYTHONPATH
    python3 -m oneflow.distributed.launch --nproc_per_node 2 main.py
    eval $(python3 -m oneflow.mock_torch disable)

Names map module for module: torch.X -> oneflow.X (torch.nn, torch.optim, torch.utils.data,
torch.distributed, torch.nn.parallel, ...; torch.load / torch.save are oneflow.load / save),
torchvision.X -> flowvision.X, safetensors and safetensors.torch -> oneflow.utils.safetensors.
A name oneflow lacks fails at once with a line naming the PyTorch name and what was looked
for: ``AttributeError: mock_torch: torch.fft is not implemented by oneflow (no oneflow.fft)``
(``ModuleNotFoundError`` for imports), so ``hasattr(torch, "compile")`` is False as it should
be. ``enable(lazy=True)`` instead hands out a placeholder that fails only when used (for
scripts that import more than they run); ``verbose=True`` reports each one on stderr.

The modules ``torch`` and friends are thin proxies over ours: reading an attribute reads it from
oneflow, setting one sets it there (``torch.backends.cudnn.benchmark = True``). Real torch
modules imported before enable() are set aside and put back by disable().
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

# torch's top-level names -> ours; a submodule maps by the same prefix unless listed exactly.
_ROOTS = {"torch": "oneflow", "torchvision": "flowvision", "safetensors": "oneflow.utils.safetensors"}
_EXACT = {"safetensors.torch": "oneflow.utils.safetensors"}

STUBS = os.path.dirname(os.path.abspath(__file__))  # holds torch/, torchvision/, safetensors/


def _root(name):
    top = name.split(".", 1)[0]
    return top if top in _ROOTS else None


def real_name(name):
    """The oneflow module a torch-side name stands for (torch.nn -> oneflow.nn)."""
    if name in _EXACT:
        return _EXACT[name]
    top = _root(name)
    return _ROOTS[top] + name[len(top):]


def _not_implemented(torch_name, looked_for):
    return f"mock_torch: {torch_name} is not implemented by oneflow (no {looked_for})"


class _Placeholder:
    """What enable(lazy=True) gives for a missing name: fails when used, naming it."""

    def __init__(self, torch_name, looked_for):
        self._message = _not_implemented(torch_name, looked_for)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self._message)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(self._message)

    def __repr__(self):
        return f"<mock_torch placeholder: {self._message}>"


class _Proxy(types.ModuleType):
    """A torch-side module whose attributes are those of one of ours."""

    def __init__(self, torch_name, real):
        super().__init__(torch_name)
        d = self.__dict__
        d["_mock_real"] = real
        d["__file__"] = getattr(real, "__file__", None)
        d["__doc__"] = getattr(real, "__doc__", None)
        # Every proxy can hold submodules (safetensors.torch over a plain module); they come
        # from the finder, not from a folder.
        d["__path__"] = []

    def __getattr__(self, name):
        real = self.__dict__["_mock_real"]
        torch_name = f"{self.__name__}.{name}"
        try:
            value = getattr(real, name)
        except AttributeError:
            if name.startswith("__"):
                raise
            try:  # a submodule nobody imported yet (torch.distributed after import torch)
                return importlib.import_module(torch_name)
            except ImportError:
                pass
            looked_for = f"{getattr(real, '__name__', real_name(self.__name__))}.{name}"
            if _state.lazy:
                if _state.verbose:
                    print(_not_implemented(torch_name, looked_for), file=sys.stderr)
                return _Placeholder(torch_name, looked_for)
            raise AttributeError(_not_implemented(torch_name, looked_for)) from None
        if isinstance(value, types.ModuleType) and not isinstance(value, _Proxy) and _root(torch_name):
            proxy = sys.modules.get(torch_name)
            if isinstance(proxy, _Proxy) and proxy._mock_real is value:
                return proxy
            return importlib.import_module(torch_name)
        return value

    def __setattr__(self, name, value):
        # The import system binds submodules (torch.nn) and module attributes (__spec__) on
        # the proxy itself; anything else a script sets is meant for the real module.
        if name.startswith("__") or isinstance(value, _Proxy):
            self.__dict__[name] = value
        else:
            setattr(self.__dict__["_mock_real"], name, value)

    def __dir__(self):
        return sorted(set(dir(self.__dict__["_mock_real"])) | set(self.__dict__))

    def __repr__(self):
        return f"<module '{self.__name__}' (oneflow.mock_torch: {real_name(self.__name__)})>"


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of torch, torchvision, safetensors and their submodules with proxies."""

    def find_spec(self, fullname, path=None, target=None):
        if not _root(fullname):
            return None
        real = self._real_module(fullname)
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=hasattr(real, "__path__"))
        spec._mock_real = real
        return spec

    def _real_module(self, fullname):
        target = real_name(fullname)
        try:
            return importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name != target and not target.startswith(f"{e.name}."):
                raise  # ours exists but failed to import something else: show that
        # Not a module of ours, but maybe an object (torch.backends.cudnn -> flow.backends.cudnn).
        parent, _, leaf = fullname.rpartition(".")
        if parent:
            owner = importlib.import_module(parent)
            value = getattr(owner.__dict__.get("_mock_real", owner), leaf, None)
            if value is not None and not isinstance(value, types.ModuleType):
                return value
        raise ModuleNotFoundError(_not_implemented(fullname, f"module {target}"), name=fullname)

    def create_module(self, spec):
        return _Proxy(spec.name, spec._mock_real)

    def exec_module(self, module):
        pass

    # python3 -m torch.distributed.launch runs our launcher's code under the torch name.
    def get_code(self, fullname):
        real = real_name(fullname)
        spec = importlib.util.find_spec(real)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_code"):
            raise ImportError(f"mock_torch: {fullname} ({real}) has no code to run")
        return spec.loader.get_code(real)

    def is_package(self, fullname):
        return hasattr(sys.modules.get(fullname), "__path__")


class _State:
    def __init__(self):
        self.finder = None
        self.saved = {}  # real torch-side modules set aside by enable()
        self.lazy = False
        self.verbose = False


_state = _State()


def _mocked(name):
    return _root(name) is not None


def is_enabled():
    return _state.finder is not None


class _Restore:
    """What enable() returns: also a context manager that undoes it at the end of the block."""

    def __init__(self, was_enabled):
        self._was_enabled = was_enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self._was_enabled:
            disable()
        return False


def enable(lazy=None, verbose=None):
    """import torch / torchvision / safetensors give ours from now on (see the module doc)."""
    was = is_enabled()
    _state.lazy = bool(lazy) if lazy is not None else os.environ.get("ONEFLOW_MOCK_TORCH_LAZY", "") in ("1", "True", "true")
    _state.verbose = bool(verbose) if verbose is not None else os.environ.get("ONEFLOW_MOCK_TORCH_VERBOSE", "") in ("1", "True", "true")
    if not was:
        for name in [n for n in sys.modules if _mocked(n)]:
            module = sys.modules[name]
            if not isinstance(module, _Proxy) and not _is_stub(module):
                _state.saved[name] = module
            del sys.modules[name]
        _state.finder = _Finder()
        sys.meta_path.insert(0, _state.finder)
    return _Restore(was)


def disable():
    """Undoes enable(): the torch-side names are free again (real modules set aside come back)."""
    if not is_enabled():
        return
    sys.meta_path.remove(_state.finder)
    _state.finder = None
    for name in [n for n in sys.modules if _mocked(n)]:
        if isinstance(sys.modules[name], _Proxy):
            del sys.modules[name]
    sys.modules.update(_state.saved)
    _state.saved = {}


def _is_stub(module):
    return (getattr(module, "__file__", None) or "").startswith(STUBS + os.sep)


def _install_from_stub(name):
    """What the PYTHONPATH stubs (torch/__init__.py, ...) call while Python imports them: turn
    the mock on and put the proxy where the import system will take it from."""
    if not _root(name):  # imported as oneflow.mock_torch.torch: nothing to stand in for
        return
    enable()
    sys.modules.pop(name, None)
    sys.modules[name] = importlib.import_module(name)
