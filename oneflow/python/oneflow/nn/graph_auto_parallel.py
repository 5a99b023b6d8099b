"""nn.Graph auto-parallel: the graph chooses the SBP of every parameter (and so, through
deduction, of every activation and gradient) from placements alone, minimising the step time its
cost model predicts under a memory limit per device.

    model.to_global(placement, flow.sbp.broadcast)      # placements only
    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)
            self.config.enable_auto_parallel(True)
            self.config.set_auto_parallel_memory_limit(64 << 20)   # bytes per device
        def build(self, x, y): ...
    g = Train(); g(x, y); print(g)       # the chosen signatures, boxing, predicted costs

What is free: every global parameter that is broadcast on every mesh axis (a placement and no
layout choice); a parameter with another SBP was laid out by the user and stays, unless
config.enable_auto_parallel_ignore_user_sbp_config(True). Graph inputs keep the SBP they come
with; the graph boxes them inside (B -> S is a local slice, no bytes).

How: before the first trace the graph's build runs once eagerly (gradients, random state and
optimizer untouched afterwards) to record its leaf modules' calls with their shapes. Each leaf
module with parameters has candidate signatures per mesh axis (Linear: data parallel x S(0)/W B,
output features W S(0) -> y S(-1), input features W S(1) -> y P, replicated; Conv2d: data
parallel, output channels, replicated; others replicated); modules without parameters pass
their input's layout on (a P input to anything but a Linear is summed first). The calls are a
chain; a dynamic programme over it, one state per activation layout, keeps per state the Pareto
front of (predicted time, predicted memory), so the search is exact for the chain at any depth
(no repeated-block collapse is needed: the cost is linear in the number of layers). ZeRO (stage
0, 1, 2) is part of the space when the optimizers are elementwise and the user did not set it.
The runner-up is the best plan that differs in at least one choice; print(graph) says why it
lost. Costs are the planner's pieces (oneflow.distributed.plan): ops.linear / conv2d FLOPs and
saved bytes at the profile's GEMM rate, the boxing table's collective bytes at its link's
bandwidth and latency, memory = parameters + gradients + optimizer state + saved activations.
"""

def prepare(graph, args, kwargs, tensors):
    """Called by nn.Graph before its trace: None when auto-parallel is off, else the chosen
    plan, applied (parameters laid out, ZeRO set); its boxing() wraps the trace of build. The
    search lives in graph_auto_parallel_search (imported here, on first use)."""
    if not graph.config._auto_parallel:
        return None
    from oneflow.nn import graph_auto_parallel_search

    return graph_auto_parallel_search.prepare(graph, args, kwargs, tensors)


def _refuse(graph_name, switch, why):
    raise NotImplementedError(f"nn.Graph {graph_name}: config.{switch}(True) would change "
                              f"nothing here: {why}")


class AutoParallelConfig:
    """graph.config's auto-parallel switches (OneFlow's names) and set_auto_parallel_memory_limit;
    mixed into nn.Graph's GraphConfig."""

    _auto_parallel = False
    _auto_ignore_user_sbp = False
    _auto_compute_ratio = 1.0
    _auto_wait_time = 0.0
    _auto_memory_limit = None
    _auto_profile = None
    _auto_plan = None  # the AutoPlan of the last compile

    def enable_auto_parallel(self, mode=True):
        """The graph chooses every free parameter's SBP before its first compile."""
        self._before_compile("enable_auto_parallel")
        self._auto_parallel = bool(mode)

    def enable_auto_parallel_ignore_user_sbp_config(self, mode=True):
        """Parameters the user laid out (an SBP other than broadcast) are free too."""
        self._before_compile("enable_auto_parallel_ignore_user_sbp_config")
        self._auto_ignore_user_sbp = bool(mode)

    def set_auto_parallel_computation_cost_ratio(self, ratio):
        """The weight of compute time against communication time in the objective (1 default)."""
        self._auto_compute_ratio = self._number("set_auto_parallel_computation_cost_ratio",
                                                ratio, "a number >= 0")

    def set_auto_parallel_wait_time(self, cost):
        """Seconds added to every collective the plan runs (a fixed cost per communication)."""
        self._auto_wait_time = self._number("set_auto_parallel_wait_time", cost,
                                            "seconds >= 0")

    def enable_auto_parallel_trunk_algo(self, mode=True):
        self._before_compile("enable_auto_parallel_trunk_algo")
        if mode:
            _refuse(self._graph_name, "enable_auto_parallel_trunk_algo",
                    "the search is an exact dynamic programme over the whole chain of calls and "
                    "charges the wait time to every collective alike; there is no trunk to find")

    def enable_auto_parallel_sbp_collector(self, mode=True):
        self._before_compile("enable_auto_parallel_sbp_collector")
        if mode:
            _refuse(self._graph_name, "enable_auto_parallel_sbp_collector",
                    "each consumer boxes its own input here (a shared proxy layout would be the "
                    "same boxing), so a collector would leave the plan and its cost unchanged")

    def set_auto_parallel_memory_limit(self, bytes_per_device):
        """Plans whose predicted memory per device exceeds this are never chosen."""
        self._auto_memory_limit = self._number("set_auto_parallel_memory_limit",
                                               bytes_per_device, "bytes per device > 0",
                                               positive=True)

    def _number(self, switch, value, needs, positive=False):
        """value as a float, or one line naming the switch and what it needs."""
        self._before_compile(switch)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not (value > 0 if positive else value >= 0):
            raise ValueError(f"nn.Graph {self._graph_name}: config.{switch} expects {needs}, "
                             f"got {value!r}")
        return float(value)

    def set_auto_parallel_profile(self, name_or_path):
        """The hardware profile costs are read from (oneflow.distributed.plan's profiles; by
        default local_cpu for CPU placements, a100_80gb for CUDA ones)."""
        self._before_compile("set_auto_parallel_profile")
        self._auto_profile = _load_profile(name_or_path)

    def _auto_parallel_repr(self):
        if not self._auto_parallel:
            return ""
        return "" if self._auto_plan is None else self._auto_plan.describe()


def _load_profile(name_or_path):
    from oneflow.distributed.plan.hardware import load_profile

    return load_profile(name_or_path)
