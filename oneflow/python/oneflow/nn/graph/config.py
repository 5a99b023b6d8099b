"""nn.Graph's compile switches (graph.config): each set before the first call, read by the
compile (nn/graph/graph.py) and the rooms it calls (micro_batches.py, amp.py, zero.py).

    g.config.set_gradient_accumulation_steps(4)
    g.config.enable_amp(True, dtype=flow.bfloat16)
    g.config.enable_zero(True, stage=2)

A switch this build does not implement raises one line naming it. A new switch is one method
here that checks its argument and keeps it in a field of __init__ (the section "switches other
subsystems read" below is where a subsystem such as auto-parallel puts its
enable_auto_parallel), plus the one place in the compile that reads the field.
"""

import oneflow._oneflow_internal as _C
from oneflow.nn import graph_auto_parallel


class GraphConfig(graph_auto_parallel.AutoParallelConfig):
    """The compile switches of one graph (graph.config); auto-parallel's (enable_auto_parallel
    and its companions) come from graph_auto_parallel.AutoParallelConfig."""

    def __init__(self, graph_name, compiled=()):
        self._graph_name = graph_name
        self._compiled = compiled  # the graph's plans: the switches are fixed once there is one
        self._accumulation_steps = 1
        self._amp_dtype = None  # autocast's dtype when AMP is on
        self._zero_stage = 0
        self._zero_min_size = 1024
        self._fuse_model_updates = False
        self._cuda_graph = False
        # ---- switches other subsystems read: each a field here and a method below in the
        # section of the same name (auto-parallel's enable_auto_parallel belongs there); the
        # compile (graph.py, Graph._compile) is the one place that reads them.

    def __repr__(self):
        amp = "off" if self._amp_dtype is None else str(self._amp_dtype)
        zero = f"stage {self._zero_stage}" if self._zero_stage else "off"
        return (f"GraphConfig(gradient_accumulation_steps={self._accumulation_steps}, "
                f"amp={amp}, zero={zero}, fuse_model_updates={self._fuse_model_updates}, "
                f"cuda_graph={self._cuda_graph})")

    def _before_compile(self, switch):
        if self._compiled:
            raise RuntimeError(f"nn.Graph {self._graph_name}: config.{switch} after the graph was "
                               f"compiled; set it in __init__ (or make a new graph)")

    def _unsupported(self, switch):
        raise NotImplementedError(
            f"nn.Graph {self._graph_name}: config.{switch} is not supported by this nn.Graph "
            f"(supported: set_gradient_accumulation_steps, enable_amp, enable_zero, "
            f"allow_fuse_model_update_ops, enable_cuda_graph)")

    def set_gradient_accumulation_steps(self, value):
        self._before_compile("set_gradient_accumulation_steps")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"nn.Graph {self._graph_name}: config.set_gradient_accumulation_steps expects an "
                f"int >= 1, got {value!r}")
        self._accumulation_steps = value

    def enable_amp(self, mode=True, *, dtype=None):
        """build runs under autocast (float16 by default, as OneFlow; bfloat16 on request)."""
        self._before_compile("enable_amp")
        if not mode:
            self._amp_dtype = None
            return
        dtype = _C.float16 if dtype is None else dtype
        if dtype not in (_C.float16, _C.bfloat16):
            raise ValueError(f"nn.Graph {self._graph_name}: config.enable_amp expects dtype "
                             f"oneflow.float16 or oneflow.bfloat16, got {dtype}")
        self._amp_dtype = dtype

    def enable_zero(self, mode=True, *, stage=1, shard_min_size=1024, shard_restore_level=1):
        """ZeRO for the graph's optimizers: each broadcast global parameter's optimizer state is
        split(0) over the ranks that broadcast it (stage 1); stage 2 also keeps only each rank's
        shard of its gradient (a partial gradient is reduce-scattered, not all-reduced).
        Parameters under shard_min_size elements stay whole. Parameters are gathered again after
        each update (shard_restore_level 1, the default)."""
        self._before_compile("enable_zero")
        if not mode:
            self._zero_stage = 0
            return
        if stage not in (1, 2):
            raise ValueError(f"nn.Graph {self._graph_name}: config.enable_zero supports stage 1 "
                             f"and 2 (stage 3 would shard the parameters too), got {stage!r}")
        if shard_restore_level != 1:
            raise ValueError(f"nn.Graph {self._graph_name}: config.enable_zero supports "
                             f"shard_restore_level=1 (parameters whole after each update), got "
                             f"{shard_restore_level!r}")
        if not isinstance(shard_min_size, int) or shard_min_size < 1:
            raise ValueError(f"nn.Graph {self._graph_name}: config.enable_zero expects "
                             f"shard_min_size an int >= 1, got {shard_min_size!r}")
        self._zero_stage, self._zero_min_size = stage, shard_min_size

    def allow_fuse_model_update_ops(self, mode=True):
        """Fold the optimizer's updates into the kernels that make the gradients: an SGD
        momentum update's gradient GEMM accumulates straight into the momentum buffer and the
        parameter update follows at once (oneflow/graph/passes.h; local float32 CPU steps, no
        weight decay/nesterov/maximize; elsewhere the updates run as traced). Off by default."""
        self._before_compile("allow_fuse_model_update_ops")
        self._fuse_model_updates = bool(mode)

    def enable_cuda_graph(self, mode=True):
        """Replay through CUDA graphs on a CUDA device (oneflow/graph/cuda_graph_replay.h): the
        first replay after the compile runs plainly, the next one is captured, later ones copy
        the inputs into the graph's own buffers and launch it, one launch per step where nothing
        splits it. Steps a graph cannot hold (random ops for now, copies with the host) and the
        GradScaler's skip split the capture or, for a graph that is not on one CUDA device, keep
        the plain replay: print(graph) says which and why. A graph's outputs are then the same
        tensors on every call, holding the latest call's values: copy what must outlive the next
        call. Off by default (it has not run on a GPU yet)."""
        self._before_compile("enable_cuda_graph")
        if not isinstance(mode, bool):
            raise TypeError(f"nn.Graph {self._graph_name}: config.enable_cuda_graph expects a "
                            f"bool, got {mode!r}")
        self._cuda_graph = mode

    # ---- switches other subsystems read

    # ---- switches this build refuses

    def allow_fuse_add_to_output(self, mode=True):
        if mode:
            self._unsupported("allow_fuse_add_to_output")

    def allow_fuse_cast_scale(self, mode=True):
        if mode:
            self._unsupported("allow_fuse_cast_scale")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        self._unsupported(name)
