"""nn.Graph itself: the class users subclass (attributes, optimizers, state, printing), its
call (a compiled plan per input signature, replayed; a new signature compiles) and the compile
(trace build with tracing.py, the micro-batches of micro_batches.py, the optimizers' updates
with amp.py's scaling and zero.py's shards). The package's docstring (nn/graph/__init__.py) has
the user's view.
"""

import collections
import contextlib
import time

import oneflow._oneflow_internal as _C
from oneflow import env
from oneflow.nn import graph_auto_parallel
from oneflow.nn.graph import amp, zero
from oneflow.nn.graph._flatten import _flatten, _hashable, _unflatten
from oneflow.nn.graph.config import GraphConfig
from oneflow.nn.graph.micro_batches import build_micro_batches
from oneflow.nn.graph.tracing import _graph_device, _Tracing
from oneflow.nn.graph_module import module_config
from oneflow.nn.modules import _assignments
from oneflow.nn.modules.module import Module
from oneflow.optim.optimizer import Optimizer


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
            if env.get_rank() not in rank_list:
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
        if not kwargs and all([isinstance(a, _C.Tensor) for a in args]):
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

    def _module_names(self):
        names = {}
        for name, module in self._modules.items():
            for sub_name, sub in module.named_modules(prefix=name):
                names.setdefault(id(sub), sub_name)
        return names

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
            flag = amp.unscale(opt, scaling) if scaling is not None else None
            if opt._clips_grads():
                opt.clip_grad()
            start = plan.num_steps()
            skipped = flag is not None and amp.flag_value(plan, flag) != 0
            snapshot = amp.snapshot(plan, opt) if skipped else None
            try:
                swaps = zero.swap_in_shards(opt, shards)
                try:
                    with opt._graph_mode():
                        opt.step()
                except BaseException:
                    zero.swap_out_shards(opt, swaps, gather=False)
                    raise
                zero.swap_out_shards(opt, swaps)
                opt.zero_grad(set_to_none=True)  # gradients are the graph's intermediates
                end = plan.num_steps()
                guard = None
                if flag is not None:
                    plan.guard_steps(start, end, flag)
                    guard, guards = guards, guards + 1
            finally:
                if snapshot is not None:
                    amp.restore(plan, opt, snapshot)  # this call's gradients held inf/NaN
            traced.append((opt, guard, skipped))
        return traced

    def _amp_device(self, tensors):
        return _graph_device(self._parameters(), tensors).split(":")[0]  # autocast's "cpu"/"cuda"

    def _compile(self, args, kwargs, tensors, key):
        started = time.perf_counter()
        params = self._parameters()
        # Gradients a replay would not write are not part of the graph: eager's stay as they are.
        saved_grads = [(p, p.grad) for p in params]
        for p in params:
            p.grad = None
        auto = graph_auto_parallel.prepare(self, args, kwargs, tensors)  # None: off
        shards = zero.zero_shards(self)
        zero.prepare_optimizer_state(self, shards)
        scaler = self._grad_scaler
        scaling = amp._Scaling(scaler, params, tensors) if scaler is not None and \
            scaler.is_enabled() else None
        state_ids = {id(p) for p in params}
        for module in self._modules.values():
            state_ids.update(id(b) for b in module.buffers())
        plan = _C.GraphPlan(self._name)
        plan.set_fuse_model_updates(self.config._fuse_model_updates)
        plan.enable_cuda_graph(self.config._cuda_graph)
        self._log(0, f"compiling for inputs "
                     f"{[(tuple(t.shape), str(t.dtype)) for t in tensors]}")
        try:
            if self.config._zero_stage == 2:
                for p in params:
                    if id(p) in shards:
                        _C.graph_set_grad_layout(p, shards[id(p)])
            with _Tracing(self, plan, self._module_names(), state_ids) as tracing:
                plan.begin_trace(tensors)
                try:
                    with auto.boxing() if auto else contextlib.nullcontext():
                        out = build_micro_batches(self, tracing, args, kwargs, tensors, scaling,
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
            _C.graph_clear_grad_layouts()
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
