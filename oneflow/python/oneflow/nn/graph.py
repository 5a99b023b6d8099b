"""nn.Graph (OneFlow's compile mode) is not implemented. The class exists so that code defining or
instantiating a Graph subclass still imports (OneFlow's tests build one at class level); running
one, or building it, fails with one line saying so. Nothing is compiled or faked."""


class Graph:
    def __init__(self, *args, **kwargs):
        self.__dict__["_graph_name"] = type(self).__name__

    def __setattr__(self, name, value):
        self.__dict__[name] = value

    def build(self, *args, **kwargs):
        raise NotImplementedError(
            f"nn.Graph: compile mode is not supported yet ({self._graph_name}.build); call the "
            f"module eagerly instead")

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(
            f"nn.Graph: compile mode is not supported yet (running {self._graph_name}); call "
            f"the module eagerly instead")

    def __getattr__(self, name):
        # Every other Graph API (state_dict, load_state_dict, debug, ...) belongs to compile
        # mode too: one line naming it, not an AttributeError that reads like a typo.
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(
            f"nn.Graph: compile mode is not supported yet ({self._graph_name}.{name}); call the "
            f"module eagerly instead")
