"""nn.graph.GraphModule, on its own so that Module.to(GraphModule) needs nothing of nn.Graph
(oneflow.nn.graph imports Module; this module imports neither)."""


class GraphModule:
    """What module.to(nn.graph.GraphModule) gives in OneFlow: a module's graph-only switches
    (activation_checkpointing, set_stage). This nn.Graph implements none of them: setting one
    is a one-line error, never a switch silently ignored."""

    def __init__(self, module):
        object.__setattr__(self, "_module", module)

    def _unsupported(self, name):
        raise NotImplementedError(
            f"nn.Graph: {type(self._module).__name__}.to(nn.graph.GraphModule).{name} is not "
            f"supported by this nn.Graph")

    def __setattr__(self, name, value):
        if name == "activation_checkpointing" and not value:
            return
        self._unsupported(name)

    def set_stage(self, *args, **kwargs):
        self._unsupported("set_stage")

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        self._unsupported(name)
