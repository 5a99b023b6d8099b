"""nn.Graph, OneFlow's compile mode: build() is traced once per input signature into a plan (the
op calls that reached core's dispatch, the layout changes of global tensors, the in-place
writes, the gradient formulas and the optimizer's updates, each with the graph inputs,
parameters, optimizer state and earlier outputs that feed it), and later calls replay that plan
in C++ (oneflow/graph/plan.h): no Python per op, no autograd recording, intermediates dropped
after their last use, fresh random numbers on every call.

    class TrainGraph(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model                      # the same Parameters as eager
            self.add_optimizer(optimizer, lr_sch=scheduler)

        def build(self, x, y):
            loss = loss_fn(self.model(x), y)
            loss.backward()                         # the update runs inside the graph
            return loss

    g = TrainGraph()
    loss = g(x, y)                                  # compiles; later calls replay

Any oneflow.optim optimizer runs in the graph because its step is ops like any other: its
update ops read the learning rate, betas, weight decay and step counts from 0-dim tensors the
optimizer keeps (oneflow/optim/optimizer.py), which the plan captures; before each replay the
optimizer refills those whose group value changed (a scheduler, a user's edit). A group's
clip_grad_max_norm/clip_grad_norm_type clip its gradients before the update, as OneFlow's graph.

Training switches, as OneFlow's: config.set_gradient_accumulation_steps(n) (micro-batches),
config.enable_amp(True, dtype=...) with set_grad_scaler(flow.amp.GradScaler(...)) (the replay
skips the update after inf/NaN gradients and the scaler backs off, as eager's GradScaler),
config.enable_zero(True, stage=1|2) (optimizer state, and with stage 2 the gradients, kept as
each rank's shard of a broadcast parameter), and on modules
m.to(nn.graph.GraphModule).activation_checkpointing = True (recomputed in backward) and
.set_stage(i, placement) (pipeline stages; the micro-batches run all forwards, then all
backwards). config.enable_auto_parallel(True) chooses the parameters' SBP from placements
alone before the first trace (graph_auto_parallel.py).

What a replay cannot reproduce fails while compiling with one line naming the module and the
op: reading a tensor's value in build (.item(), .numpy(), a Python branch on a tensor),
backward() without an optimizer. Config switches this build does not implement
(allow_fuse_add_to_output, allow_fuse_cast_scale, ZeRO stage 3) raise one line naming the
switch; switches are set before the first call (after it, one line says so).
"""

import collections
import contextlib
import time

import oneflow as flow
from oneflow.nn import graph_auto_parallel
from oneflow.nn.graph_module import GraphModule, module_config  # noqa: F401  (nn.graph.GraphModule)
from oneflow.nn.modules import _assignments
from oneflow.nn.modules.module import Module
from oneflow.optim.optimizer import Optimizer


_VALUE_READS = ("numpy", "item", "tolist", "__bool__", "__float__", "__int__", "__index__")


class GraphConfig(graph_auto_parallel.AutoParallelConfig):
    """The compile switches of one graph (graph.config); auto-parallel's in
    graph_auto_parallel.py."""

    def __init__(self, graph_name, compiled=()):
        self._graph_name = graph_name
        self._compiled = compiled  # the graph's plans: the switches are fixed once there is one
        self._accumulation_steps = 1
        self._amp_dtype = None  # autocast's dtype when AMP is on
        self._zero_stage = 0
        self._zero_min_size = 1024
        self._fuse_model_updates = False
        self._cuda_graph = False

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
        dtype = flow.float16 if dtype is None else dtype
        if dtype not in (flow.float16, flow.bfloat16):
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


# ---------------------------------------------------------------- flattening


class _Leaf:
    """Where the i-th tensor of a flattened structure goes back."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, _Leaf) and other.index == self.index

    def __hash__(self):
        return hash(("leaf", self.index))


def _flatten(value, tensors):
    """value with each tensor replaced by a _Leaf (tensors appended); tuples stay hashable."""
    if isinstance(value, flow.Tensor):
        tensors.append(value)
        return _Leaf(len(tensors) - 1)
    if isinstance(value, (list, tuple)):
        items = tuple(_flatten(v, tensors) for v in value)
        return items if isinstance(value, tuple) else ("__list__",) + items
    if isinstance(value, dict):
        return ("__dict__",) + tuple((k, _flatten(v, tensors)) for k, v in value.items())
    return value


def _unflatten(template, tensors):
    if isinstance(template, _Leaf):
        return tensors[template.index]
    if isinstance(template, tuple):
        if template[:1] == ("__list__",):
            return [_unflatten(v, tensors) for v in template[1:]]
        if template[:1] == ("__dict__",):
            return {k: _unflatten(v, tensors) for k, v in template[1:]}
        return tuple(_unflatten(v, tensors) for v in template)
    return template


def _hashable(key):
    try:
        hash(key)
        return key
    except TypeError:
        return repr(key)


# ---------------------------------------------------------------- optimizers in a graph


def _update_signature(opt):
    """What decides the update ops an optimizer's step traces (its op, each group's flags and
    state): a change needs a new compile. Numbers (lr, betas, weight decay) are tensors the plan
    reads, so they may change freely."""
    return [(opt._op, tuple(sorted(opt._flags(g).items())), tuple(opt._state_names(g)))
            for g in opt.param_groups]


class _Compiled:
    """One input signature's plan and what its replay needs from Python."""

    def __init__(self, key, plan, template, compile_s, signatures):
        self.key = key
        self.plan = plan
        self.template = template
        self.compile_s = compile_s
        self.signatures = signatures  # per optimizer: _update_signature at compile time


# ---------------------------------------------------------------- the trace


@contextlib.contextmanager
def _paused(plan):
    """Work inside a trace that the replay must not redo (host reads, snapshots)."""
    plan.pause_trace()
    try:
        yield
    finally:
        plan.resume_trace()


def _graph_device(params, tensors):
    """Where a graph computes: its first parameter's device, else its first input's (a
    placement's device type for a global tensor, "cuda"; else the device, "cuda:1")."""
    for t in list(params) + list(tensors):
        return t.placement.type if t.is_global else str(t.device)
    return "cpu"


def _to_stage(graph, where, config, value):
    """value's tensors moved to a pipeline stage's placement (their SBP kept where the
    placement's hierarchy has as many dimensions, else broadcast)."""
    pl = config.stage_placement  # partial sums are summed on the way
    if isinstance(value, flow.Tensor):
        if not value.is_global:
            raise RuntimeError(
                f"nn.Graph {graph._name}: module '{where}' is pipeline stage {config.stage_id} on "
                f"{pl} but got a local tensor; pipeline stages take global tensors")
        if value.placement == pl:
            return value
        sbp = tuple(value.sbp)
        if len(sbp) != len(pl.hierarchy) or flow.sbp.partial_sum in sbp:
            sbp = (flow.sbp.broadcast,) * len(pl.hierarchy)
        return value.to_global(placement=pl, sbp=sbp)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_stage(graph, where, config, v) for v in value)
    if isinstance(value, dict):
        return {k: _to_stage(graph, where, config, v) for k, v in value.items()}
    return value


class _Tracing:
    """While build is traced: module calls name the plan's scope, and reading a traced tensor's
    value (which a replay could not redo) is a one-line error naming the module and the op."""

    active = None

    def __init__(self, graph, plan, module_names, state_ids):
        self.graph, self.plan = graph, plan
        self.module_names = module_names
        self.state_ids = state_ids
        self.scope = []
        self.saved = {}

    def __enter__(self):
        if _Tracing.active is not None:
            raise RuntimeError(
                f"nn.Graph {self.graph._name}: cannot call a graph inside "
                f"{_Tracing.active.graph._name}.build")
        _Tracing.active = self
        tracing = self
        original_call = Module.__call__
        self.saved[(Module, "__call__")] = original_call

        def traced_call(module, *args, **kwargs):
            name = tracing.module_names.get(id(module))
            config = module_config(module)
            if name is None and config is None:
                return original_call(module, *args, **kwargs)
            run = original_call
            if config is not None:
                where = name or type(module).__name__
                if config.stage_placement is not None:
                    args, kwargs = _to_stage(tracing.graph, where, config, (args, kwargs))
                if config.activation_checkpointing and flow.is_grad_enabled():
                    from oneflow.utils.checkpoint import checkpoint

                    def run(m, *a, **k):
                        # Forward without saving; backward runs original_call again with the
                        # forward's random state (the plan gives those draws the forward's
                        # numbers on every replay). The state is kept as numbers: checkpoint's
                        # own copy is a tensor, which the trace would record.
                        forward_state = []

                        def forward_again(mod, *a2, **k2):
                            if not forward_state:
                                forward_state.append(flow._C.generator_state())
                                return original_call(mod, *a2, **k2)
                            now = flow._C.generator_state()
                            flow._C.set_generator_state(*forward_state[0])
                            try:
                                return original_call(mod, *a2, **k2)
                            finally:
                                flow._C.set_generator_state(*now)

                        return checkpoint(forward_again, m, *a, preserve_rng_state=False, **k)
            if name is None:
                return run(module, *args, **kwargs)
            tracing.scope.append(name)
            tracing.plan.set_scope(name)
            try:
                return run(module, *args, **kwargs)
            finally:
                tracing.scope.pop()
                tracing.plan.set_scope(tracing.scope[-1] if tracing.scope else "")

        Module.__call__ = traced_call
        for method in _VALUE_READS:
            original = getattr(flow.Tensor, method, None)
            if original is None:
                continue
            self.saved[(flow.Tensor, method)] = original
            setattr(flow.Tensor, method, self._guarded(method, original))
        return self

    def _guarded(self, method, original):
        tracing = self

        def read(tensor, *args, **kwargs):
            if tracing.plan.traced(tensor) or id(tensor) in tracing.state_ids:
                where = tracing.scope[-1] if tracing.scope else "<graph>"
                made_by = tracing.plan.producer_of(tensor)
                raise RuntimeError(
                    f"nn.Graph {tracing.graph._name}: build reads a tensor's value "
                    f"(Tensor.{method}) in module '{where}' ({made_by}); a compiled graph "
                    f"replays without Python and cannot depend on tensor values")
            return original(tensor, *args, **kwargs)

        return read

    def __exit__(self, *exc):
        for (owner, method), original in self.saved.items():
            setattr(owner, method, original)
        _Tracing.active = None
        return False


# ---------------------------------------------------------------- Graph


class Graph:
    """Subclass it, assign modules in __init__, write build(*args), call it like a function."""

    def __init__(self):
        d = self.__dict__
        d["_name"] = type(self).__name__
        d["_modules"] = collections.OrderedDict()
        d["_optimizers"] = []  # [(optimizer, lr_scheduler or None)]
        d["_compiled"] = []  # [_Compiled], one per input signature
        d["_debug"] = -1
        d["_grad_scaler"] = None
        d["config"] = GraphConfig(d["_name"], d["_compiled"])

    # ---- attributes

    def __setattr__(self, name, value):
        if "_modules" not in self.__dict__:
            raise RuntimeError(
                f"nn.Graph {type(self).__name__}: call super().__init__() in __init__ before "
                f"assigning attributes (got {name})")
        if isinstance(value, Module):
            self._modules[name] = value
        elif name in self._modules:
            del self._modules[name]
        self.__dict__[name] = value
        self.__dict__["_submodule_list"] = None

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_name", "_modules", "_optimizers", "_compiled",
                                             "_debug", "_grad_scaler", "config"):
            raise AttributeError(
                f"nn.Graph {type(self).__name__}: no attribute {name!r} (did __init__ call "
                f"super().__init__()?)")
        raise AttributeError(f"nn.Graph {self._name}: no attribute or Graph API {name!r}")

    @property
    def name(self):
        return self._name

    @property
    def training(self):
        """True for a training graph: one with an optimizer (as OneFlow decides)."""
        return len(self._optimizers) > 0

    @property
    def is_compiled(self):
        return len(self._compiled) > 0

    def build(self, *args, **kwargs):
        raise NotImplementedError(f"nn.Graph {self._name}: subclasses must define build()")

    def add_optimizer(self, optim, *, lr_sch=None, is_sparse=False):
        if is_sparse:
            raise NotImplementedError(
                f"nn.Graph {self._name}: add_optimizer(is_sparse=True) is not supported by this "
                f"nn.Graph")
        if not isinstance(optim, Optimizer):
            raise TypeError(
                f"nn.Graph {self._name}: add_optimizer expects a oneflow.optim optimizer, got "
                f"{type(optim).__name__}")
        if optim._op is None:
            raise TypeError(
                f"nn.Graph {self._name}: add_optimizer got {type(optim).__name__}, whose step() "
                f"does not run oneflow.optim's update ops (core/optim.h); a replay could not "
                f"follow its hyper-parameters")
        if lr_sch is not None and getattr(lr_sch, "optimizer", optim) is not optim:
            raise ValueError(
                f"nn.Graph {self._name}: add_optimizer's lr_sch steps another optimizer than "
                f"the one added")
        if self._compiled:
            raise RuntimeError(
                f"nn.Graph {self._name}: add_optimizer after the graph was compiled")
        self._optimizers.append((optim, lr_sch))

    def set_grad_scaler(self, grad_scaler=None):
        """Loss scaling for AMP training (flow.amp.GradScaler): backward scales the loss, the
        gradients are unscaled before the update, the replay skips an optimizer's update when
        its gradients hold inf or NaN, and the scaler backs off or grows as in eager."""
        from oneflow.amp import GradScaler

        if grad_scaler is not None and not isinstance(grad_scaler, GradScaler):
            raise TypeError(f"nn.Graph {self._name}: set_grad_scaler expects a "
                            f"flow.amp.GradScaler, got {type(grad_scaler).__name__}")
        if self._compiled:
            raise RuntimeError(f"nn.Graph {self._name}: set_grad_scaler after the graph was "
                               f"compiled")
        self.__dict__["_grad_scaler"] = grad_scaler

    def debug(self, v_level=0, *, ranks=None, max_py_stack_depth=2, only_user_py_stack=True,
              op_repr_with_py_stack=False):
        """v_level >= 0 prints each compile (inputs, steps, time); >= 1 also the plan."""
        if not isinstance(v_level, int):
            raise TypeError(f"nn.Graph {self._name}: debug expects an int level, got {v_level!r}")
        if ranks is not None:
            rank_list = [ranks] if isinstance(ranks, int) else list(ranks)
            if flow.env.get_rank() not in rank_list:
                v_level = -1
        self.__dict__["_debug"] = v_level

    def _log(self, level, text):
        if self._debug >= level:
            print(f"(GRAPH:{self._name}) {text}", flush=True)

    # ---- state

    def state_dict(self, destination=None):
        """Each module's state_dict under its attribute name, each optimizer's under
        '_optimizer<i>' (module and optimizer state, as eager holds them)."""
        out = collections.OrderedDict() if destination is None else destination
        for name, module in self._modules.items():
            out[name] = module.state_dict()
        for i, (opt, _) in enumerate(self._optimizers):
            out[f"_optimizer{i}"] = opt.state_dict()
        return out

    def load_state_dict(self, state_dict, strict=True):
        expected = list(self._modules) + [f"_optimizer{i}" for i in range(len(self._optimizers))]
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        if strict and (missing or unexpected):
            raise RuntimeError(
                f"nn.Graph {self._name}.load_state_dict: missing keys {missing}, unexpected "
                f"keys {unexpected}")
        for name, module in self._modules.items():
            if name in state_dict:
                module.load_state_dict(state_dict[name], strict=strict)
        for i, (opt, _) in enumerate(self._optimizers):
            if f"_optimizer{i}" in state_dict:
                opt.load_state_dict(state_dict[f"_optimizer{i}"])

    # ---- printing

    def __repr__(self):
        lines = [f"(GRAPH:{self._name}:{type(self).__name__}): ("]
        lines.append(f"  (CONFIG:config:{self.config!r})")
        if self.config._auto_parallel_repr():
            lines.append("  " + self.config._auto_parallel_repr().replace("\n", "\n  "))
        for name, module in self._modules.items():
            text = repr(module).replace("\n", "\n  ")
            lines.append(f"  (MODULE:{name}:{type(module).__name__}): {text}")
        for i, (opt, sch) in enumerate(self._optimizers):
            extra = f", lr_sch={type(sch).__name__}" if sch is not None else ""
            lines.append(f"  (OPTIMIZER:_optimizer{i}:{type(opt).__name__}{extra})")
        for i, c in enumerate(self._compiled):
            lines.append(f"  (PLAN:{i}: {c.plan.num_steps()} steps, peak "
                         f"{c.plan.peak_live()} live intermediates): (")
            for line in c.plan.describe().splitlines():
                lines.append("    " + line)
            lines.append("  )")
            lines.append(f"  (CUDA GRAPH:{i}: {c.plan.cuda_graph_status()})")
        lines.append(")")
        return "\n".join(lines)

    # ---- calling

    def __call__(self, *args, **kwargs):
        if self._compiled and _assignments.count() != self.__dict__["_assignments"]:
            self._check_module_state()
        # train() / eval() decide what build traces (dropout, batch statistics): part of the key.
        modes = tuple([m.training for m in self._submodules()])
        if not kwargs and all([isinstance(a, flow.Tensor) for a in args]):
            tensors, key = list(args), (len(args), modes)  # the common call: tensors only
        else:
            tensors = []
            key = (_hashable(_flatten((args, kwargs), tensors)), modes)
        for c in self._compiled:
            if c.key == key and c.plan.matches(tensors):
                if c.optimizer_state != self._optimizer_state():
                    # load_state_dict gave an optimizer new state tensors and groups: the plan
                    # holds the old ones, so this signature compiles again.
                    self._compiled.remove(c)
                    break
                return self._replay(c, tensors)
        return self._compile(args, kwargs, tensors, key)

    def _module_state(self):
        """What the plans captured of the modules: each submodule, parameter and buffer (the
        objects themselves), and each module's graph switches (GraphModule)."""
        self.__dict__["_submodule_list"] = None
        state = []
        for m in self._submodules():
            state.append(m)
            state.extend(m._parameters.values())
            state.extend(m._buffers.values())
            config = module_config(m)
            if config is not None:
                state.append((config.activation_checkpointing, config.stage_id,
                              config.stage_placement))
        return state

    @staticmethod
    def _same_state(a, b):
        return len(a) == len(b) and all(
            x is y or (isinstance(x, tuple) and isinstance(y, tuple) and x == y)
            for x, y in zip(a, b))

    def _check_module_state(self):
        """Some module got a parameter, buffer or submodule assigned since the last compile:
        when it is one of this graph's, the plans hold the old tensors, so they are dropped and
        each signature compiles again on its next call."""
        self.__dict__["_assignments"] = _assignments.count()
        state = self._module_state()
        if not self._same_state(state, self.__dict__["_captured_modules"]):
            self._log(0, "a module's parameters, buffers, submodules or graph switches changed: "
                         "compiling again")
            self._compiled.clear()

    def _optimizer_state(self):
        return [(id(opt.state), id(opt.param_groups)) for opt, _ in self._optimizers]

    def _replay(self, c, tensors):
        if c.scaling is not None:
            c.scaling.follow()  # the user may have set the scaler's scale since
        for (opt, _), signature in zip(self._optimizers, c.signatures):
            if _update_signature(opt) != signature:
                raise RuntimeError(
                    f"nn.Graph {self._name}: {type(opt).__name__}'s update changed after compiling "
                    f"(a flag such as maximize, amsgrad, nesterov or momentum on/off); make a new "
                    f"graph")
            with opt._graph_mode():
                opt._refresh_hypers()  # the plan reads lr, betas, ... from these tensors
        outputs = c.plan.replay(tensors)
        if c.guarded:
            c.scaling.update([not c.plan.guard_ran(guard) for guard in c.guarded])
        for opt, sch in self._optimizers:
            if sch is not None:
                sch.step()
        return _unflatten(c.template, outputs)

    def _submodules(self):
        cached = self.__dict__.get("_submodule_list")
        if cached is None:
            seen, cached = set(), []
            for module in self._modules.values():
                for m in module.modules():
                    if id(m) not in seen:
                        seen.add(id(m))
                        cached.append(m)
            self.__dict__["_submodule_list"] = cached
        return cached

    def _parameters(self):
        seen, params = set(), []
        for module in self._modules.values():
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    def _zero_shards(self):
        """With enable_zero: id(parameter) -> the layout of its shard (split(0) where it is
        broadcast), for each optimizer parameter the config shards."""
        if not self.config._zero_stage:
            return {}
        from oneflow.distributed.zero import _shard_sbp

        shards = {}
        for opt, _ in self._optimizers:
            if not opt._elementwise:
                raise ValueError(
                    f"nn.Graph {self._name}: config.enable_zero cannot shard "
                    f"{type(opt).__name__}'s state: its update reads whole parameters (a norm "
                    f"over each); use ZeRO with an elementwise optimizer")
            for group in opt.param_groups:
                for p in group["params"]:
                    sbp = _shard_sbp(p)
                    if sbp is not None and p.numel() >= self.config._zero_min_size:
                        shards[id(p)] = sbp
        if not shards:
            raise ValueError(
                f"nn.Graph {self._name}: config.enable_zero shards the optimizer state of global "
                f"parameters broadcast over several ranks with at least shard_min_size "
                f"({self.config._zero_min_size}) elements; none of the optimizers' parameters is "
                f"one")
        return shards

    def _prepare_optimizer_state(self, shards):
        """The optimizers' state and hyper-parameter tensors exist before the trace, so the plan
        holds them (and updates them in place) instead of re-creating them on every replay.
        With ZeRO the state is made (or re-laid out) as the parameter's shard."""
        for opt, _ in self._optimizers:
            zeros = {}
            for group in opt.param_groups:
                for p in group["params"]:
                    shard = shards.get(id(p))
                    if shard is not None:
                        zeros[id(p)] = (lambda p=p, shard=shard: flow.zeros(
                            p.shape, dtype=p.dtype, placement=p.placement, sbp=shard))
            with opt._graph_mode():
                opt._prepare(zeros)
            for group in opt.param_groups:
                for p in group["params"]:
                    shard = shards.get(id(p))
                    if shard is None:
                        continue
                    state = opt.state[p]
                    for k, v in list(state.items()):
                        if isinstance(v, flow.Tensor) and v.is_global and \
                                tuple(v.shape) == tuple(p.shape) and tuple(v.sbp) != shard:
                            state[k] = v.to_global(placement=p.placement, sbp=shard)

    def _module_names(self):
        names = {}
        for name, module in self._modules.items():
            for sub_name, sub in module.named_modules(prefix=name):
                names.setdefault(id(sub), sub_name)
        return names

    def _unscale(self, opt, scaling):
        """GradScaler's unscale_ in the trace: the gradients divided by the scale in place, and
        the count of inf/NaN elements among them (broadcast on every rank of the job)."""
        counts = {}  # per placement (or device): the sum of its gradients' inf/NaN counts
        with flow.no_grad():
            for group in opt.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    bad = (~flow.isfinite(g)).to(flow.float32).sum()
                    key = (g.placement, tuple(bad.sbp)) if g.is_global else str(g.device)
                    counts[key] = bad if key not in counts else counts[key] + bad
                    g.mul_(scaling.like("inv", g))
            flag = None
            for bad in counts.values():  # one reduction per placement, to every rank
                if bad.is_global:
                    everywhere = flow.placement(
                        bad.placement.type, ranks=list(range(flow.env.get_world_size())))
                    bad = bad.to_global(placement=everywhere, sbp=flow.sbp.broadcast)
                flag = bad if flag is None else flag + bad
        return flag

    def _trace_updates(self, plan, shards, scaling):
        """Each optimizer's step, traced: [(optimizer, the index of the guard that skips its
        update after inf/NaN gradients or None, whether this call's gradients held any)]. The
        groups' clip_grad settings clip the gradients first (as OneFlow's graph does). With ZeRO
        the update runs on each parameter's shard; with a grad scaler the gradients are unscaled
        first and, when this very call found inf/NaN, the update the trace just ran is undone
        (the replay skips it by the guard)."""
        traced = []
        guards = 0
        for opt, _ in self._optimizers:
            flag = self._unscale(opt, scaling) if scaling is not None else None
            if opt._clips_grads():
                opt.clip_grad()
            start = plan.num_steps()
            skipped = flag is not None and self._flag_value(plan, flag) != 0
            snapshot = self._snapshot(plan, opt) if skipped else None
            try:
                swaps = self._swap_in_shards(opt, shards)
                try:
                    with opt._graph_mode():
                        opt.step()
                except BaseException:
                    self._swap_out_shards(opt, swaps, gather=False)
                    raise
                self._swap_out_shards(opt, swaps)
                opt.zero_grad(set_to_none=True)  # gradients are the graph's intermediates
                end = plan.num_steps()
                guard = None
                if flag is not None:
                    plan.guard_steps(start, end, flag)
                    guard, guards = guards, guards + 1
            finally:
                if snapshot is not None:
                    self._restore(plan, opt, snapshot)  # this call's gradients held inf/NaN
            traced.append((opt, guard, skipped))
        return traced

    @staticmethod
    def _flag_value(plan, flag):
        """The inf/NaN count of the trace's own call, read without tracing."""
        with _paused(plan):
            local = flag.to_local() if flag.is_global else flag
            item = _Tracing.active.saved[(flow.Tensor, "item")]  # not the trace's guarded read
            return float(item(local))

    @staticmethod
    def _snapshot(plan, opt):
        """Copies of the parameters and state an update would change (tracing paused)."""
        with _paused(plan), flow.no_grad():
            params = [(p, p.detach().clone()) for g in opt.param_groups for p in g["params"]]
            states = {}
            for p, _ in params:
                st = opt.state.get(p, {})
                states[id(p)] = {k: (v.detach().clone() if isinstance(v, flow.Tensor) else v)
                                 for k, v in st.items()}
        return params, states

    @staticmethod
    def _restore(plan, opt, snapshot):
        params, states = snapshot
        with _paused(plan), flow.no_grad():
            for p, saved in params:
                p.copy_(saved)
                st = opt.state.get(p, {})
                for k, v in states[id(p)].items():
                    if isinstance(v, flow.Tensor) and isinstance(st.get(k), flow.Tensor):
                        st[k].copy_(v)
                    else:
                        st[k] = v

    @staticmethod
    def _swap_in_shards(opt, shards):
        """ZeRO: each sharded parameter with a gradient replaced in its group by its shard
        (a local slice), with the gradient's shard (stage 1: a local slice of the all-reduced
        gradient; stage 2: the reduce-scattered gradient as backward left it) and its state."""
        swaps = []
        if not shards:
            return swaps
        with flow.no_grad():
            for group in opt.param_groups:
                params = group["params"]
                for i, p in enumerate(params):
                    sbp = shards.get(id(p))
                    if sbp is None or p.grad is None:
                        continue
                    shard = p.detach().to_global(placement=p.placement, sbp=sbp)
                    shard.requires_grad_(True)
                    g = p.grad
                    shard.grad = g if tuple(g.sbp) == sbp else \
                        g.to_global(placement=p.placement, sbp=sbp)
                    opt.state[shard] = opt.state.pop(p)
                    params[i] = shard
                    swaps.append((group, i, p, shard))
        return swaps

    @staticmethod
    def _swap_out_shards(opt, swaps, gather=True):
        """After the update: the parameters back in their groups, gathered from the updated
        shards (an all-gather); gather=False after a failed step (the parameters as they were)."""
        with flow.no_grad():
            for group, i, p, shard in swaps:
                group["params"][i] = p
                opt.state[p] = opt.state.pop(shard)
                if gather:
                    p.copy_(shard)
                shard.grad = None

    def _num_stages(self):
        """How many pipeline stages set_stage made among the graph's modules (0: none)."""
        return len({module_config(m).stage_id for m in self._submodules()
                    if module_config(m) is not None and module_config(m).stage_placement
                    is not None})

    def _amp_device(self, tensors):
        return _graph_device(self._parameters(), tensors).split(":")[0]  # autocast's "cpu"/"cuda"

    def _build_micro_batches(self, args, kwargs, tensors, scaling, amp_device):
        """build once, or with gradient accumulation over n steps (OneFlow's semantics): each
        tensor input is cut into n micro-batches along dim 0, build runs on each with backward
        scaling the loss by 1/n, the gradients add up, the optimizer steps once; each output is
        the micro-batches' outputs concatenated along dim 0 (scalars stacked). With S pipeline
        stages a micro-batch's backward waits until S forwards are in flight (F0 F1 B0 F2 B1 ..
        for 2 stages), so each stage has the next micro-batch to work on while the next stage
        works on this one, and at most S micro-batches' activations are kept. With a grad
        scaler, backward scales the loss; with AMP, build runs under autocast and backward
        outside it (as eager code calls it)."""
        n = self.config._accumulation_steps
        amp = self.config._amp_dtype
        in_flight = self._num_stages() if n > 1 else 0
        backward = flow.Tensor.backward
        deferred = []

        def graph_backward(loss, gradient=None, *a, **kw):
            if gradient is None:
                if n > 1:
                    loss = loss * (1.0 / n)
                if scaling is not None:
                    loss = loss * scaling.like("scale", loss)
            if in_flight:
                deferred.append((loss, gradient, a, kw))
                return None
            if amp is None:
                return backward(loss, gradient, *a, **kw)
            from oneflow.amp import autocast

            with autocast(amp_device, amp, enabled=False):
                return backward(loss, gradient, *a, **kw)

        def run(*a, **kw):
            if amp is None:
                return self.build(*a, **kw)
            from oneflow.amp import autocast

            with autocast(amp_device, amp):
                return self.build(*a, **kw)

        if n == 1 and scaling is None and amp is None:
            return self.build(*args, **kwargs)
        for i, t in enumerate(tensors):
            if n > 1 and (t.ndim == 0 or t.shape[0] % n != 0):
                raise RuntimeError(
                    f"nn.Graph {self._name}: gradient accumulation over {n} micro-batches needs "
                    f"each input's dim 0 divisible by {n}, got shape {tuple(t.shape)} for "
                    f"tensor input {i}")
        flow.Tensor.backward = graph_backward
        try:
            if n == 1:
                return run(*args, **kwargs)
            template = _flatten((args, kwargs), [])
            outs = []
            for k in range(n):
                micro = [t[k * (t.shape[0] // n):(k + 1) * (t.shape[0] // n)] for t in tensors]
                micro_args, micro_kwargs = _unflatten(template, micro)
                outs.append(run(*micro_args, **micro_kwargs))
                while len(deferred) >= in_flight > 0 or (deferred and k == n - 1):
                    loss, gradient, a, kw = deferred.pop(0)
                    backward(loss, gradient, *a, **kw)
        finally:
            flow.Tensor.backward = backward
        leaves = []
        for out in outs:
            flat = []
            out_template = _flatten(out, flat)
            leaves.append(flat)
        joined = [flow.stack(list(parts)) if parts[0].ndim == 0 else flow.cat(list(parts), dim=0)
                  for parts in zip(*leaves)]
        return _unflatten(out_template, joined)

    def _compile(self, args, kwargs, tensors, key):
        started = time.perf_counter()
        params = self._parameters()
        # Gradients a replay would not write are not part of the graph: eager's stay as they are.
        saved_grads = [(p, p.grad) for p in params]
        for p in params:
            p.grad = None
        auto = graph_auto_parallel.prepare(self, args, kwargs, tensors)  # None: off
        shards = self._zero_shards()
        self._prepare_optimizer_state(shards)
        scaler = self._grad_scaler
        scaling = _Scaling(scaler, params, tensors) if scaler is not None and \
            scaler.is_enabled() else None
        state_ids = {id(p) for p in params}
        for module in self._modules.values():
            state_ids.update(id(b) for b in module.buffers())
        plan = flow._C.GraphPlan(self._name)
        plan.set_fuse_model_updates(self.config._fuse_model_updates)
        plan.enable_cuda_graph(self.config._cuda_graph)
        self._log(0, f"compiling for inputs "
                     f"{[(tuple(t.shape), str(t.dtype)) for t in tensors]}")
        try:
            if self.config._zero_stage == 2:
                for p in params:
                    if id(p) in shards:
                        flow._C.graph_set_grad_layout(p, shards[id(p)])
            with _Tracing(self, plan, self._module_names(), state_ids):
                plan.begin_trace(tensors)
                try:
                    with auto.boxing() if auto else contextlib.nullcontext():
                        out = self._build_micro_batches(args, kwargs, tensors, scaling,
                                                        self._amp_device(tensors))
                    plan.set_scope("")
                    left = [p for p in params if p.grad is not None]
                    if left and not self._optimizers:
                        raise RuntimeError(
                            f"nn.Graph {self._name}: build calls backward() but the graph has no "
                            f"optimizer; add one with add_optimizer (a replay does not write "
                            f".grad)")
                    traced = self._trace_updates(plan, shards, scaling)
                    out_tensors = []
                    template = _flatten(out, out_tensors)
                    plan.end_trace(out_tensors)
                except BaseException:
                    plan.abort_trace()
                    raise
        finally:
            flow._C.graph_clear_grad_layouts()
            for p, g in saved_grads:
                p.grad = g
        compiled = _Compiled(key, plan, template, time.perf_counter() - started,
                             [_update_signature(opt) for opt, _ in self._optimizers])
        compiled.optimizer_state = self._optimizer_state()
        compiled.scaling = scaling
        compiled.guarded = [guard for _, guard, _ in traced if guard is not None]
        self._compiled.append(compiled)
        self.__dict__["_assignments"] = _assignments.count()
        self.__dict__["_captured_modules"] = self._module_state()
        self._log(0, f"compiled {plan.num_steps()} steps in {compiled.compile_s * 1e3:.1f} ms")
        self._log(1, "plan:\n" + plan.describe())
        if auto:
            auto.note_boxing(plan.describe())
        if scaling is not None:
            scaling.update([skipped for _, guard, skipped in traced if guard is not None])
        for opt, sch in self._optimizers:
            if sch is not None:
                sch.step()
        detached = [t.detach() for t in out_tensors]
        return _unflatten(template, detached)


class _Scaling:
    """A graph's loss scale as tensors the plan holds (so a new scale needs no new compile):
    the scale and its inverse on the graph's device, laid out like the tensor they meet."""

    def __init__(self, scaler, params, tensors):
        self.scaler = scaler
        device = _graph_device(params, tensors)
        value = scaler.get_scale()
        self.current = value
        self.values = {"scale": flow.tensor(value, dtype=flow.float32, device=device),
                       "inv": flow.tensor(1.0 / value, dtype=flow.float32, device=device)}

    def follow(self):
        """The tensors take the scaler's scale (GradScaler.load_state_dict, update(new_scale))."""
        value = self.scaler.get_scale()
        if value != self.current:
            self.current = value
            with flow.no_grad():
                self.values["scale"].fill_(value)
                self.values["inv"].fill_(1.0 / value)

    def like(self, which, t):
        value = self.values[which]
        if t.is_global:
            return value.to_global(placement=t.placement,
                                   sbp=(flow.sbp.broadcast,) * len(t.placement.hierarchy))
        return value if value.device == t.device else value.to(t.device)

    def update(self, found_infs):
        """GradScaler.update after a step whose optimizers found inf/NaN or not."""
        from oneflow.amp import GradScaler

        if not found_infs:
            return
        scaler = self.scaler
        scaler._per_optimizer = {k: {"stage": GradScaler._STEPPED, "found_inf": bool(f)}
                                 for k, f in enumerate(found_infs)}
        scaler.update()
        self.follow()

