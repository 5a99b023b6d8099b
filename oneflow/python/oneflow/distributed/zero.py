"""ZeroRedundancyOptimizer: optimizer state sharded over the data-parallel ranks (ZeRO-1).

    P = flow.placement("cpu", ranks=[0, 1])
    model = Net().to_global(placement=P, sbp=flow.sbp.broadcast)
    opt = flow.distributed.ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=flow.optim.AdamW, lr=1e-3)
    loss.backward(); opt.step(); opt.zero_grad()

PyTorch's ZeroRedundancyOptimizer gives each rank whole parameters; this one follows SBP: every
global parameter that is broadcast along a hierarchy dimension gets a *shard* layout, split(0)
along that dimension (the parameter's other dimensions keep their layout, so a tensor-parallel
weight stays split where it was). The wrapped optimizer (any oneflow.optim class) is built over
"shard parameters" in that layout, so its state (Adam's moments, SGD's momentum) is created
split(0): each rank holds 1/n of it (uneven splits are legal: a bias of 3 rows on 2 ranks puts
2 rows on rank 0 and 1 on rank 1). One step:

    1. the gradient, broadcast after backward (the all-reduce), is sliced to the shard layout
       (B -> S(0) is a local slice, no communication; a gradient still partial is
       reduce-scattered P -> S(0));
    2. the wrapped optimizer updates each rank's shard of the parameter and of its state;
    3. the parameter is re-broadcast from the shards (S(0) -> B, an all-gather).

The update arithmetic thus runs on 1/n of the elements per rank, and the optimizer state takes
1/n of the memory (state_bytes_per_rank() measures it). What is not saved (so this is ZeRO-1,
not ZeRO-2): the autograd engine boxes every gradient to its leaf's layout before accumulating
it (oneflow/global/global_tensor.cc, LeafGrad), so a broadcast parameter's gradient is
all-reduced to broadcast and held whole; keeping only the reduce-scattered shard needs the
engine to accept a gradient layout per leaf (e.g. to_global's grad_sbp).

state_dict() gives the wrapped optimizer's state dict with the state tensors in their shard
layout: global tensors of the parameter's full logical shape, so they save either gathered
(flow.save(sd, file)) or per rank (flow.save(sd, dir, sharded=True), no communication), and
load_state_dict accepts a state dict in any layout (the plain optimizer's, this one's, a
sharded checkpoint read lazily), re-laid out to the shards. consolidate_state_dict(to=0) and
the parameter indices follow PyTorch's.
"""

import oneflow as flow
from oneflow import _sharded_checkpoint
from oneflow.optim.optimizer import Optimizer

_NAME = "ZeroRedundancyOptimizer"


def _shard_sbp(p):
    """The layout p's optimizer state takes: split(0) on each hierarchy dimension of more than
    one rank where p is broadcast (None when p is not global, has no dims or nothing to split)."""
    if not p.is_global or p.dim() == 0:
        return None
    sbp, sizes = tuple(p.sbp), p.placement.hierarchy
    shard = tuple(flow.sbp.split(0) if s == flow.sbp.broadcast and n > 1 else s
                  for s, n in zip(sbp, sizes))
    return None if shard == sbp else shard


def _local_nbytes(t):
    local = t.to_local() if t.is_global else t
    return local.numel() * local.element_size()


class ZeroRedundancyOptimizer(Optimizer):
    """Wraps optimizer_class (e.g. flow.optim.AdamW) so that its state is split(0) over the
    ranks of each broadcast global parameter. Keyword arguments go to optimizer_class."""

    def __init__(self, params, optimizer_class, process_group=None,
                 parameters_as_bucket_view=False, overlap_with_ddp=False, **defaults):
        if process_group is not None:
            raise NotImplementedError(
                f"{_NAME}: process_group is not supported; the state is sharded over each "
                "parameter's own placement (got process_group={process_group!r})")
        if parameters_as_bucket_view:
            raise NotImplementedError(
                f"{_NAME}: parameters_as_bucket_view=True is not supported (got True)")
        if overlap_with_ddp:
            raise NotImplementedError(
                f"{_NAME}: overlap_with_ddp=True is not supported (global parameters need no "
                "DDP; got True)")
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(
                f"{_NAME}: optimizer_class must be a oneflow.optim.Optimizer subclass such as "
                f"flow.optim.AdamW, got {optimizer_class!r}")
        if issubclass(optimizer_class, ZeroRedundancyOptimizer):
            raise TypeError(f"{_NAME}: optimizer_class cannot be {_NAME} itself")
        self._optimizer_class = optimizer_class
        self._shard_of = {}  # id(param) -> its shard parameter (absent: updated as is)
        self._inner = None
        # The base class builds self.param_groups (with the user's parameters) through
        # add_param_group, which also creates the shard parameters and the inner groups.
        self._pending_defaults = defaults
        super().__init__(params, dict(defaults))

    # The wrapped optimizer sees shard parameters; ours holds the user's ones.
    def _shard(self, p):
        return self._shard_of.get(id(p), p)

    def _make_shard(self, p):
        sbp = _shard_sbp(p)
        if sbp is None:
            return p
        with flow.no_grad():
            # B -> S(0) is a local slice: no communication, 1/n of the memory.
            shard = p.detach().to_global(placement=p.placement, sbp=sbp).clone()
        shard.requires_grad_(p.requires_grad)
        return shard

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"{_NAME}: a param group must be a dict, got {type(param_group).__name__}")
        before = len(self.param_groups)
        super().add_param_group(param_group)
        group = self.param_groups[before]
        for p in group["params"]:
            if id(p) not in self._shard_of:
                shard = self._make_shard(p)
                if shard is not p:
                    self._shard_of[id(p)] = shard
        inner_group = dict(group)
        inner_group["params"] = [self._shard(p) for p in group["params"]]
        if self._inner is None:
            self._inner = self._optimizer_class([inner_group], **self._pending_defaults)
            # One set of groups: the wrapper's groups hold the hyper-parameters the wrapped
            # optimizer reads (lr schedulers edit them), with the user's parameters.
            self._sync_groups()
        else:
            self._inner.add_param_group(inner_group)
            self._sync_groups()

    def _sync_groups(self):
        # Hyper-parameters are read from the wrapper's groups at each step (an LR scheduler
        # or the user edits those); the wrapped optimizer's groups get them copied.
        for ours, theirs in zip(self.param_groups, self._inner.param_groups):
            for key, value in ours.items():
                if key != "params":
                    theirs[key] = value

    @property
    def optim(self):
        """The wrapped optimizer (PyTorch's name), over the shard parameters."""
        return self._inner

    @property
    def state(self):
        return self._inner.state if self._inner is not None else {}

    @state.setter
    def state(self, value):
        # Optimizer.__init__ assigns an empty state; the wrapped optimizer owns the real one.
        pass

    def shard_of(self, param):
        """The tensor (the parameter's layout with split(0) for broadcast) its state uses."""
        return self._shard(param)

    def step(self, closure=None):
        loss = self._run_closure(closure)
        self._sync_groups()
        with flow.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    shard = self._shard_of.get(id(p))
                    if shard is None:
                        continue
                    if p.grad is None:
                        shard.grad = None
                        continue
                    # The parameter may have been changed since the last step (load_state_dict,
                    # an in-place edit): the shard starts from its current value (a local slice).
                    shard.copy_(p)
                    # B -> S(0): local slice; a partial gradient is reduce-scattered.
                    shard.grad = p.grad.to_global(placement=shard.placement, sbp=shard.sbp)
            self._inner.step()
            for group in self.param_groups:
                for p in group["params"]:
                    shard = self._shard_of.get(id(p))
                    if shard is None or p.grad is None:
                        continue
                    # S(0) -> B: the all-gather re-broadcasts the updated parameter.
                    p.copy_(shard)
                    shard.grad = None
        return loss

    def zero_grad(self, set_to_none=True):
        super().zero_grad(set_to_none)
        self._inner.zero_grad(set_to_none)

    def state_bytes_per_rank(self):
        """Bytes of this rank's local pieces of every state tensor (moments, buffers; the 0-dim
        step counts, which every rank holds whole, aside)."""
        total = 0
        for value in self._inner.state.values():
            for t in value.values() if isinstance(value, dict) else ():
                if isinstance(t, flow.Tensor) and t.ndim > 0:
                    total += _local_nbytes(t)
        return total

    def state_dict(self):
        sd = self._inner.state_dict()
        # Groups: the wrapper's (the same hyper-parameters and parameter indices).
        return {"state": sd["state"], "param_groups": sd["param_groups"]}

    def consolidate_state_dict(self, to=0):
        """PyTorch's call before saving on one rank: the state is global here, so every rank
        already sees the whole of it (state_dict() gathers nothing until saved); kept for
        scripts written for PyTorch."""
        if not isinstance(to, int) or not 0 <= to < flow.env.get_world_size():
            raise ValueError(
                f"{_NAME}.consolidate_state_dict: to must be a rank of the world "
                f"(0..{flow.env.get_world_size() - 1}), got {to!r}")

    def load_state_dict(self, state_dict):
        # Each state tensor is re-laid out to its shard parameter (a slice of a broadcast one,
        # a boxing of any other layout, a lazy read of a sharded checkpoint's byte ranges).
        index_to_shard = {}
        for group, saved in zip(self.param_groups, state_dict.get("param_groups", [])):
            for index, p in zip(saved["params"], group["params"]):
                index_to_shard[index] = self._shard(p)

        def relayout(shard, value):
            value = _sharded_checkpoint.materialize_like(value, shard)
            if isinstance(value, flow.Tensor):
                if shard.is_global and value.dim() == shard.dim() and value.shape == shard.shape:
                    if value.is_global:
                        value = value.to_global(placement=shard.placement, sbp=shard.sbp)
                    else:
                        # A local whole (a file saved from a gathered state): each rank its slice.
                        value = value.to_global(
                            placement=shard.placement,
                            sbp=[flow.sbp.broadcast] * len(shard.sbp)).to_global(sbp=shard.sbp)
                return value
            if isinstance(value, dict):
                return {k: relayout(shard, v) for k, v in value.items()}
            return value

        state = {}
        for index, value in state_dict["state"].items():
            shard = index_to_shard.get(index)
            state[index] = relayout(shard, value) if shard is not None else value
        self._inner.load_state_dict({"state": state, "param_groups": state_dict["param_groups"]})
        # The loaded hyper-parameters become the wrapper's (the parameters stay the user's).
        for ours, theirs in zip(self.param_groups, self._inner.param_groups):
            for key, value in theirs.items():
                if key != "params":
                    ours[key] = value

    def __repr__(self):
        return f"{_NAME}({self._optimizer_class.__name__}, {len(self._shard_of)} sharded parameters)"
