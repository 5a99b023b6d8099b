"""nn.graph.GraphModule, on its own so that Module.to(GraphModule) needs nothing of nn.Graph
(oneflow.nn.graph imports Module; this module imports neither)."""

from oneflow.nn.modules import _assignments

_CONFIG = "_oneflow_graph_module_config"


class GraphModuleConfig:
    """A module's graph-only switches; kept on the module, read while a graph traces it."""

    __slots__ = ("activation_checkpointing", "stage_id", "stage_placement")

    def __init__(self):
        self.activation_checkpointing = False
        self.stage_id = None
        self.stage_placement = None


def module_config(module):
    """The switches set on module through module.to(GraphModule), or None."""
    return module.__dict__.get(_CONFIG)


class GraphModule:
    """What module.to(nn.graph.GraphModule) gives in OneFlow: a module's graph-only switches.

        block.to(nn.graph.GraphModule).activation_checkpointing = True
        stage.to(nn.graph.GraphModule).set_stage(1, placement=flow.placement("cpu", [1]))

    activation_checkpointing: inside an nn.Graph the module keeps none of its activations for
    backward; the replay runs its forward again where backward needs them (the same random
    numbers). set_stage: the module is pipeline stage stage_id on `placement` (the placement
    of its parameters when omitted); the graph moves its inputs there, and with
    config.set_gradient_accumulation_steps(n) a micro-batch's backward starts once as many
    forwards as there are stages are in flight, so each stage works on one micro-batch while
    the next stage works on another. Eager calls of the module are not affected."""

    def __init__(self, module):
        object.__setattr__(self, "_module", module)

    def _config(self):
        """The module's switches, for a change: graphs that traced the module compile again."""
        _assignments.bump()
        d = self._module.__dict__
        if _CONFIG not in d:
            d[_CONFIG] = GraphModuleConfig()
        return d[_CONFIG]

    def _name(self):
        return type(self._module).__name__

    @property
    def activation_checkpointing(self):
        config = module_config(self._module)
        return bool(config and config.activation_checkpointing)

    @property
    def stage_id(self):
        config = module_config(self._module)
        return None if config is None else config.stage_id

    @property
    def stage_placement(self):
        config = module_config(self._module)
        return None if config is None else config.stage_placement

    def __setattr__(self, name, value):
        if name == "activation_checkpointing":
            if not isinstance(value, bool):
                raise TypeError(f"nn.Graph: {self._name()}.to(nn.graph.GraphModule)."
                                f"activation_checkpointing expects a bool, got {value!r}")
            self._config().activation_checkpointing = value
            return
        if name == "stage_id":
            self.set_stage(value)
            return
        raise AttributeError(f"nn.Graph: {self._name()}.to(nn.graph.GraphModule) has no switch "
                             f"{name!r} (activation_checkpointing, set_stage)")

    def set_stage(self, stage_id, placement=None):
        import oneflow as flow

        if not isinstance(stage_id, int) or isinstance(stage_id, bool) or stage_id < 0:
            raise ValueError(f"nn.Graph: {self._name()}.to(nn.graph.GraphModule).set_stage "
                             f"expects a stage id >= 0, got {stage_id!r}")
        if placement is None:
            placements = {p.placement for p in self._module.parameters() if p.is_global}
            if len(placements) != 1:
                raise ValueError(
                    f"nn.Graph: {self._name()}.to(nn.graph.GraphModule).set_stage({stage_id}) "
                    f"needs a placement: its parameters are on "
                    f"{len(placements) or 'no'} placement(s), pass placement=")
            placement = placements.pop()
        if not isinstance(placement, flow.placement):
            raise TypeError(f"nn.Graph: {self._name()}.to(nn.graph.GraphModule).set_stage "
                            f"expects a flow.placement, got {type(placement).__name__}")
        config = self._config()
        config.stage_id, config.stage_placement = stage_id, placement

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"nn.Graph: {self._name()}.to(nn.graph.GraphModule) has no switch "
                             f"{name!r} (activation_checkpointing, set_stage)")
