"""A pickle reader that builds only data: the restricted unpickler behind oneflow.load.

    reader = RestrictedUnpickler(file, allowed={("collections", "OrderedDict"): OrderedDict},
                                 what="oneflow.load: 'model.pt'")
    obj = reader.load()

Pickle can call any function the file names (`os.system`, `builtins.eval`, ...), and it does so
while it reads, so checking the result afterwards is too late. This reader refuses before
anything is built:

- a global (module.name) outside the `allowed` table, which maps each permitted name to the
  object to use for it (a PyTorch rebuild function can be mapped to our own);
- BUILD (setting an object's state), except plain attributes on an OrderedDict, which is how
  PyTorch attaches `_metadata` to its state dicts.

Every other opcode only makes containers, numbers and strings, or calls a callable, and the
only callables on the stack are the allowed globals. Refusals raise `RefusedGlobal` with one
line naming what was refused and how to opt out.

What the allowed callables may allocate is bounded by the file's size: `bytearray(n)`,
`set(range(n))`, `frozenset(range(n))` together may build at most ALLOC_SLACK bytes plus the
file's own size, so a 30-byte file cannot ask for 4 GB.
"""

import _compat_pickle
import collections
import pickle

# Names every restricted read accepts: the containers and scalars pickle itself needs.
BASIC_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "slice"): slice,
    ("builtins", "range"): range,
}


def _latin1_encode(text, encoding="latin1"):
    # Protocol 2 pickles bytes as _codecs.encode(str, "latin1"); no other codec is needed, and
    # a codec name chosen by the file could import modules.
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise pickle.UnpicklingError(f"_codecs.encode with codec {encoding!r}")
    return text.encode("latin1")


BASIC_GLOBALS[("_codecs", "encode")] = _latin1_encode

OPT_OUT = "if you trust the file, load it with weights_only=False"


class RefusedGlobal(pickle.UnpicklingError):
    """The file names something a checkpoint may not contain (raised before it is built)."""


class Unsupported(Exception):
    """The file is well formed but holds something oneflow cannot represent (an int16 tensor)."""


# What a file may build beyond its own bytes through the allowed callables.
ALLOC_SLACK = 1 << 20
# The callables whose result's size the file chooses by an argument, not by its own bytes.
_SIZED = (bytearray, set, frozenset)


def _file_size(file):
    try:
        here = file.tell()
        end = file.seek(0, 2)
        file.seek(here)
        return max(end - here, 0)
    except (AttributeError, OSError, ValueError):
        return 0


class RestrictedUnpickler(pickle._Unpickler):  # the Python reader: its opcodes can be gated
    def __init__(self, file, allowed, what, persistent_load=None):
        super().__init__(file, encoding="latin1")
        self._allowed = allowed
        self._what = what
        self._budget = _file_size(file) + ALLOC_SLACK
        if persistent_load is not None:
            self.persistent_load = persistent_load

    def find_class(self, module, name):
        if self.proto < 3:  # protocol 2 (PyTorch's) writes Python 2 names: __builtin__.set
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            else:
                module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = self._allowed.get((module, name))
        if found is None:
            raise RefusedGlobal(
                f"{self._what}: refused to load global '{module}.{name}': a checkpoint may hold "
                f"only tensors, dtypes, devices, placements, SBPs, numbers, strings and plain "
                f"containers ({OPT_OUT})"
            )
        if found in _SIZED:
            return self._bounded(found, f"{module}.{name}")
        return found

    def _bounded(self, fn, name):
        """fn with its result's size charged to the file's budget before it is built."""
        def call(*args):
            arg = args[0] if args else b""
            if isinstance(arg, int):
                size = arg  # bytearray(n): n zero bytes
            elif isinstance(arg, (range, bytes, bytearray, str, list, tuple, set, frozenset, dict)):
                size = len(arg) * (1 if isinstance(arg, (bytes, bytearray, str)) else 8)
            else:
                raise RefusedGlobal(f"{self._what}: refused {name}() of a {type(arg).__name__}: "
                                    f"a checkpoint may build it only from plain data ({OPT_OUT})")
            if size > self._budget:
                raise RefusedGlobal(
                    f"{self._what}: refused {name}({size if isinstance(arg, int) else '...'}): it "
                    f"would build {size} bytes, more than the {self._budget} bytes a file of "
                    f"this size may build ({OPT_OUT})")
            self._budget -= size
            return fn(*args)
        return call

    def load_build(self):
        state = self.stack[-1]
        inst = self.stack[-2]
        if type(inst) is collections.OrderedDict and isinstance(state, dict):
            if all(isinstance(k, str) for k in state):
                self.stack.pop()
                inst.__dict__.update(state)
                return
        raise RefusedGlobal(
            f"{self._what}: refused to set the state of a {type(inst).__name__} object: a "
            f"checkpoint may only build tensors and plain containers ({OPT_OUT})"
        )

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build
