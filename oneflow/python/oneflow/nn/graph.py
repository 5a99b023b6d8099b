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

What a replay cannot reproduce fails while compiling with one line naming the module and the
op: reading a tensor's value in build (.item(), .numpy(), a Python branch on a tensor),
backward() without an optimizer. Config switches this build does not implement (AMP, ZeRO,
fused updates, pipeline stages, activation checkpointing) raise one line naming the switch.
"""

import collections
import time

import oneflow as flow
from oneflow.nn.graph_module import GraphModule  # noqa: F401  (nn.graph.GraphModule)
from oneflow.nn.modules.module import Module
from oneflow.optim.adam import Adam
from oneflow.optim.sgd import SGD


_VALUE_READS = ("numpy", "item", "tolist", "__bool__", "__float__", "__int__", "__index__")


class GraphConfig:
    """The compile switches of one graph (graph.config)."""

    def __init__(self, graph_name):
        self._graph_name = graph_name
        self._accumulation_steps = 1

    def __repr__(self):
        return f"GraphConfig(gradient_accumulation_steps={self._accumulation_steps})"

    def _unsupported(self, switch):
        raise NotImplementedError(
            f"nn.Graph {self._graph_name}: config.{switch} is not supported by this nn.Graph "
            f"(supported: set_gradient_accumulation_steps)")

    def set_gradient_accumulation_steps(self, value):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(
                f"nn.Graph {self._graph_name}: config.set_gradient_accumulation_steps expects an "
                f"int >= 1, got {value!r}")
        self._accumulation_steps = value

    def enable_amp(self, mode=True, **kwargs):
        if mode:
            self._unsupported("enable_amp")

    def set_grad_scaler(self, *args, **kwargs):
        self._unsupported("set_grad_scaler")

    def enable_zero(self, mode=True, **kwargs):
        if mode:
            self._unsupported("enable_zero")

    def allow_fuse_model_update_ops(self, mode=True):
        if mode:
            self._unsupported("allow_fuse_model_update_ops")

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


class _Update:
    """One traced parameter update: the plan step, its optimizer group and parameter state."""

    __slots__ = ("step", "opt", "group", "state", "adam")

    def __init__(self, step, opt, group, state):
        self.step, self.opt, self.group, self.state = step, opt, group, state
        self.adam = isinstance(opt, Adam)


def _group_attrs(group, adam):
    """The update op's numeric attrs that follow group hyper-parameters (lr included)."""
    if adam:
        beta1, beta2 = group["betas"]
        return {"lr": group["lr"], "beta1": beta1, "beta2": beta2, "eps": group["eps"],
                "weight_decay": group["weight_decay"]}
    return {"lr": group["lr"], "momentum": group["momentum"], "dampening": group["dampening"],
            "weight_decay": group["weight_decay"]}


# Hyper-parameters that decide which ops the trace made: changing them needs a new compile.
_STRUCTURAL = ("maximize", "amsgrad", "nesterov")


class _Compiled:
    """One input signature's plan and what its replay needs from Python."""

    def __init__(self, key, plan, template, updates, compile_s):
        self.key = key
        self.plan = plan
        self.template = template
        self.updates = updates
        self.compile_s = compile_s
        # Per group (by id): the hyper-parameters the plan's attrs hold now.
        self.group_values = {}
        for u in updates:
            self.group_values[id(u.group)] = _group_attrs(u.group, u.adam)
        self.structural = {id(u.group): tuple(u.group.get(k) for k in _STRUCTURAL)
                           for u in updates}
        # Per group: (group, is Adam, its update steps); Adam's updates count steps.
        groups = {}
        for u in updates:
            groups.setdefault(id(u.group), (u.group, u.adam, []))[2].append(u.step)
        self.groups = list(groups.values())
        self.adam_updates = [u for u in updates if u.adam]


# ---------------------------------------------------------------- the trace


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
            if name is None:
                return original_call(module, *args, **kwargs)
            tracing.scope.append(name)
            tracing.plan.set_scope(name)
            try:
                return original_call(module, *args, **kwargs)
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
        d["config"] = GraphConfig(d["_name"])

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
                                             "_debug", "config"):
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
        if not isinstance(optim, (SGD, Adam)):
            raise NotImplementedError(
                f"nn.Graph {self._name}: add_optimizer got {type(optim).__name__}; this nn.Graph "
                f"runs SGD, Adam and AdamW")
        if lr_sch is not None and getattr(lr_sch, "optimizer", optim) is not optim:
            raise ValueError(
                f"nn.Graph {self._name}: add_optimizer's lr_sch steps another optimizer than "
                f"the one added")
        if self._compiled:
            raise RuntimeError(
                f"nn.Graph {self._name}: add_optimizer after the graph was compiled")
        self._optimizers.append((optim, lr_sch))

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
        lines.append(")")
        return "\n".join(lines)

    # ---- calling

    def __call__(self, *args, **kwargs):
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

    def _optimizer_state(self):
        return [(id(opt.state), id(opt.param_groups)) for opt, _ in self._optimizers]

    def _replay(self, c, tensors):
        for group, adam, steps in c.groups:
            self._refresh_group(c, group, adam, steps)
        for u in c.adam_updates:
            u.state["step"] = int(u.state["step"]) + 1
            c.plan.set_attr(u.step, "step", float(u.state["step"]))
        outputs = c.plan.replay(tensors)
        for opt, sch in self._optimizers:
            if sch is not None:
                sch.step()
        return _unflatten(c.template, outputs)

    def _refresh_group(self, c, group, adam, steps):
        """Before a replay: the update ops' attrs follow their group's hyper-parameters (an lr
        scheduler, a user's edit)."""
        values = _group_attrs(group, adam)
        if values == c.group_values[id(group)]:
            return
        if tuple(group.get(k) for k in _STRUCTURAL) != c.structural[id(group)]:
            raise RuntimeError(
                f"nn.Graph {self._name}: an optimizer's maximize, amsgrad or nesterov changed "
                f"after compiling; make a new graph")
        for step in steps:
            for name, value in values.items():
                c.plan.set_attr(step, name, float(value))
        c.group_values[id(group)] = values

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

    def _prepare_optimizer_state(self):
        """The optimizers' state tensors exist before the trace, so the plan holds them (and
        updates them in place) instead of re-creating them on every replay."""
        for opt, _ in self._optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    state = opt.state.setdefault(p, {})
                    if isinstance(opt, Adam):
                        if len(state) == 0:
                            state["step"] = 0
                            state["exp_avg"] = flow.zeros_like(p)
                            state["exp_avg_sq"] = flow.zeros_like(p)
                        if group["amsgrad"] and "max_exp_avg_sq" not in state:
                            state["max_exp_avg_sq"] = state["exp_avg_sq"].clone()
                    elif group["momentum"] != 0 and state.get("momentum_buffer") is None:
                        state["momentum_buffer"] = flow.zeros_like(p)
                        state["_first_step"] = True  # SGD starts the buffer at the gradient

    def _module_names(self):
        names = {}
        for name, module in self._modules.items():
            for sub_name, sub in module.named_modules(prefix=name):
                names.setdefault(id(sub), sub_name)
        return names

    def _trace_updates(self, plan):
        updates = []
        for opt, _ in self._optimizers:
            pending = [(group, p) for group in opt.param_groups for p in group["params"]
                       if p.grad is not None]
            start = plan.num_steps()
            opt.step()
            opt.zero_grad(set_to_none=True)  # gradients are the graph's intermediates
            steps = [i for i in range(start, plan.num_steps())
                     if plan.step_name(i) in ("sgd_update", "adam_update")]
            if len(steps) != len(pending):
                raise RuntimeError(
                    f"nn.Graph {self._name}: {type(opt).__name__}.step made {len(steps)} update "
                    f"ops for {len(pending)} parameters with gradients")
            for i, (group, p) in zip(steps, pending):
                if not isinstance(opt, Adam):
                    plan.set_attr(i, "first_step", 0.0)  # replays continue the buffer
                updates.append(_Update(i, opt, group, opt.state[p]))
        return updates

    def _build_micro_batches(self, args, kwargs, tensors):
        """build once, or with gradient accumulation over n steps (OneFlow's semantics): each
        tensor input is cut into n micro-batches along dim 0, build runs on each with backward
        scaling the loss by 1/n, the gradients add up, the optimizer steps once; each output is
        the micro-batches' outputs concatenated along dim 0 (scalars stacked)."""
        n = self.config._accumulation_steps
        if n == 1:
            return self.build(*args, **kwargs)
        for i, t in enumerate(tensors):
            if t.ndim == 0 or t.shape[0] % n != 0:
                raise RuntimeError(
                    f"nn.Graph {self._name}: gradient accumulation over {n} micro-batches needs "
                    f"each input's dim 0 divisible by {n}, got shape {tuple(t.shape)} for "
                    f"tensor input {i}")
        template = _flatten((args, kwargs), [])
        backward = flow.Tensor.backward

        def scaled_backward(loss, gradient=None, *a, **kw):
            if gradient is None:
                loss = loss * (1.0 / n)
            return backward(loss, gradient, *a, **kw)

        flow.Tensor.backward = scaled_backward
        try:
            outs = []
            for k in range(n):
                micro = [t[k * (t.shape[0] // n):(k + 1) * (t.shape[0] // n)] for t in tensors]
                micro_args, micro_kwargs = _unflatten(template, micro)
                outs.append(self.build(*micro_args, **micro_kwargs))
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
        self._prepare_optimizer_state()
        state_ids = {id(p) for p in params}
        for module in self._modules.values():
            state_ids.update(id(b) for b in module.buffers())
        plan = flow._C.GraphPlan(self._name)
        self._log(0, f"compiling for inputs "
                     f"{[(tuple(t.shape), str(t.dtype)) for t in tensors]}")
        try:
            with _Tracing(self, plan, self._module_names(), state_ids):
                plan.begin_trace(tensors)
                try:
                    out = self._build_micro_batches(args, kwargs, tensors)
                    plan.set_scope("")
                    left = [p for p in params if p.grad is not None]
                    if left and not self._optimizers:
                        raise RuntimeError(
                            f"nn.Graph {self._name}: build calls backward() but the graph has no "
                            f"optimizer; add one with add_optimizer (a replay does not write "
                            f".grad)")
                    updates = self._trace_updates(plan)
                    out_tensors = []
                    template = _flatten(out, out_tensors)
                    plan.end_trace(out_tensors)
                except BaseException:
                    plan.abort_trace()
                    raise
        finally:
            for p, g in saved_grads:
                p.grad = g
        for opt, _ in self._optimizers:
            for state in opt.state.values():
                if isinstance(state, dict):
                    state.pop("_first_step", None)
        compiled = _Compiled(key, plan, template, updates, time.perf_counter() - started)
        compiled.optimizer_state = self._optimizer_state()
        self._compiled.append(compiled)
        self._log(0, f"compiled {plan.num_steps()} steps in {compiled.compile_s * 1e3:.1f} ms")
        self._log(1, "plan:\n" + plan.describe())
        for opt, sch in self._optimizers:
            if sch is not None:
                sch.step()
        detached = [t.detach() for t in out_tensors]
        return _unflatten(template, detached)
