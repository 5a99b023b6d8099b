"""ZeRO in nn.Graph (config.enable_zero): which optimizer parameters are sharded and how
(zero_shards), their optimizer state made as each rank's shard before the trace
(prepare_optimizer_state), and the update traced on the shards (swap_in_shards before the
optimizer's step, swap_out_shards after: the parameters gathered again).

    shards = zero_shards(graph)                   # id(parameter) -> its shard's sbp
    prepare_optimizer_state(graph, shards)
    swaps = swap_in_shards(opt, shards); opt.step(); swap_out_shards(opt, swaps)
"""

import oneflow._oneflow_internal as _C
from oneflow import _creation, _global
from oneflow._grad_mode import no_grad

_global_zeros = _global._creation(_creation.zeros)  # zeros(..., placement=, sbp=)


def zero_shards(graph):
    """With enable_zero: id(parameter) -> the layout of its shard (split(0) where it is
    broadcast), for each optimizer parameter the config shards."""
    if not graph.config._zero_stage:
        return {}
    from oneflow.distributed.zero import _shard_sbp

    shards = {}
    for opt, _ in graph._optimizers:
        if not opt._elementwise:
            raise ValueError(
                f"nn.Graph {graph._name}: config.enable_zero cannot shard "
                f"{type(opt).__name__}'s state: its update reads whole parameters (a norm "
                f"over each); use ZeRO with an elementwise optimizer")
        for group in opt.param_groups:
            for p in group["params"]:
                sbp = _shard_sbp(p)
                if sbp is not None and p.numel() >= graph.config._zero_min_size:
                    shards[id(p)] = sbp
    if not shards:
        raise ValueError(
            f"nn.Graph {graph._name}: config.enable_zero shards the optimizer state of global "
            f"parameters broadcast over several ranks with at least shard_min_size "
            f"({graph.config._zero_min_size}) elements; none of the optimizers' parameters is "
            f"one")
    return shards


def prepare_optimizer_state(graph, shards):
    """The optimizers' state and hyper-parameter tensors exist before the trace, so the plan
    holds them (and updates them in place) instead of re-creating them on every replay.
    With ZeRO the state is made (or re-laid out) as the parameter's shard."""
    for opt, _ in graph._optimizers:
        zeros = {}
        for group in opt.param_groups:
            for p in group["params"]:
                shard = shards.get(id(p))
                if shard is not None:
                    zeros[id(p)] = (lambda p=p, shard=shard: _global_zeros(
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
                    if isinstance(v, _C.Tensor) and v.is_global and \
                            tuple(v.shape) == tuple(p.shape) and tuple(v.sbp) != shard:
                        state[k] = v.to_global(placement=p.placement, sbp=shard)


def swap_in_shards(opt, shards):
    """ZeRO: each sharded parameter with a gradient replaced in its group by its shard
    (a local slice), with the gradient's shard (stage 1: a local slice of the all-reduced
    gradient; stage 2: the reduce-scattered gradient as backward left it) and its state."""
    swaps = []
    if not shards:
        return swaps
    with no_grad():
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

def swap_out_shards(opt, swaps, gather=True):
    """After the update: the parameters back in their groups, gathered from the updated
    shards (an all-gather); gather=False after a failed step (the parameters as they were)."""
    with no_grad():
        for group, i, p, shard in swaps:
            group["params"][i] = p
            opt.state[p] = opt.state.pop(shard)
            if gather:
                p.copy_(shard)
            shard.grad = None

