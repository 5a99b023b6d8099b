"""oneflow.fx: symbolic tracing of modules into editable graphs, as OneFlow's (and torch.fx's).

    import oneflow.fx
    gm = oneflow.fx.symbolic_trace(model)        # GraphModule: same outputs as model
    for node in gm.graph.nodes: ...              # edit: replace_all_uses_with, erase_node
    gm.recompile()
    oneflow.fx.replace_pattern(gm, pattern, replacement)   # rewrite every match of a function
    oneflow.fx.Interpreter(gm).run(x)            # node by node, each step overridable

Graph and Node: fx/graph.py; tracing: fx/tracer.py; GraphModule: fx/graph_module.py;
replace_pattern: fx/subgraph_rewriter.py; Interpreter (run node by node): fx/interpreter.py.
"""

from oneflow.fx.graph import Graph, Node, map_arg
from oneflow.fx.graph_module import GraphModule
from oneflow.fx.interpreter import Interpreter
from oneflow.fx.proxy import Proxy, TraceError
from oneflow.fx.tracer import Tracer, symbolic_trace
from oneflow.fx.subgraph_rewriter import replace_pattern

__all__ = ["Graph", "GraphModule", "Interpreter", "Node", "Proxy", "TraceError", "Tracer", "map_arg",
           "replace_pattern", "symbolic_trace"]
