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
alone before the first trace (nn/graph_auto_parallel.py).

What a replay cannot reproduce fails while compiling with one line naming the module and the
op: reading a tensor's value in build (.item(), .numpy(), a Python branch on a tensor),
backward() without an optimizer. Config switches this build does not implement
(allow_fuse_add_to_output, allow_fuse_cast_scale, ZeRO stage 3) raise one line naming the
switch; switches are set before the first call (after it, one line says so).

The package, one concept a module: graph.py (the Graph class, its call and compile), config.py
(graph.config), tracing.py (the trace of build), micro_batches.py (gradient accumulation and
pipeline stages), amp.py (the GradScaler in a graph), zero.py (ZeRO's shards), _flatten.py
(arguments and outputs as tensor lists); GraphModule is nn/graph_module.py.
"""

from oneflow.nn.graph.config import GraphConfig  # noqa: F401
from oneflow.nn.graph.graph import Graph  # noqa: F401
from oneflow.nn.graph_module import GraphModule, module_config  # noqa: F401  (nn.graph.GraphModule)

