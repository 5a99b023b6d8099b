"""oneflow.fx.replace_pattern: every occurrence of a traced pattern replaced by a replacement.

    def pattern(a, b):     return flow.cat([flow.neg(a), b]).sum()
    def replacement(a, b): return flow.stack([a, b])
    matches = replace_pattern(gm, pattern, replacement)   # gm is recompiled

A match is a set of gm's nodes with the pattern's ops, targets and argument structure, the
pattern's inputs standing for any nodes (the same node each time an input repeats); nodes inside
a match other than its result may have no users outside it. Matches do not overlap.
"""

from oneflow.fx.graph import Node


class Match:
    def __init__(self, anchor, nodes_map):
        self.anchor = anchor  # gm's node that gave the pattern's result
        self.nodes_map = nodes_map  # pattern node -> gm node

    def __repr__(self):
        return f"Match(anchor={self.anchor.name})"


def _graph_of(fn):
    from oneflow.fx.graph_module import GraphModule
    from oneflow.fx.tracer import symbolic_trace

    return fn.graph if isinstance(fn, GraphModule) else symbolic_trace(fn).graph


def _single_result(graph, what):
    out = [n for n in graph.nodes if n.op == "output"][0]
    if not isinstance(out.args[0], Node):
        raise ValueError(f"replace_pattern: the {what} must return one traced value, got "
                         f"{type(out.args[0]).__name__}")
    return out.args[0]


def _match_node(pn, gn, m, taken):
    if pn.op == "placeholder":
        if pn in m:
            return m[pn] is gn
        m[pn] = gn
        return True
    if pn in m:
        return m[pn] is gn
    if gn in taken or gn in m.values() or pn.op != gn.op or pn.target != gn.target:
        return False
    if len(pn.args) != len(gn.args) or set(pn.kwargs) != set(gn.kwargs):
        return False
    m[pn] = gn
    return (all(_match_arg(pa, ga, m, taken) for pa, ga in zip(pn.args, gn.args))
            and all(_match_arg(pn.kwargs[k], gn.kwargs[k], m, taken) for k in pn.kwargs))


def _match_arg(pa, ga, m, taken):
    if isinstance(pa, Node):
        return isinstance(ga, Node) and _match_node(pa, ga, m, taken)
    if isinstance(pa, (list, tuple)):
        return (type(pa) is type(ga) and len(pa) == len(ga)
                and all(_match_arg(a, b, m, taken) for a, b in zip(pa, ga)))
    if isinstance(pa, dict):
        return (isinstance(ga, dict) and pa.keys() == ga.keys()
                and all(_match_arg(pa[k], ga[k], m, taken) for k in pa))
    return type(pa) is type(ga) and pa == ga


def replace_pattern(gm, pattern, replacement):
    """Replaces each match of pattern (a function or module, traced) in gm by replacement's
    nodes; returns the matches."""
    p_graph, r_graph = _graph_of(pattern), _graph_of(replacement)
    p_anchor = _single_result(p_graph, "pattern")
    p_inputs = [n for n in p_graph.nodes if n.op == "placeholder"]
    r_inputs = [n for n in r_graph.nodes if n.op == "placeholder"]
    if len(p_inputs) != len(r_inputs):
        raise ValueError(f"replace_pattern: the pattern takes {len(p_inputs)} inputs and the "
                         f"replacement {len(r_inputs)}; they must take the same")
    if any(n.op in ("get_attr", "call_module") for n in r_graph.nodes):
        raise ValueError("replace_pattern: the replacement reads module attributes "
                         "(get_attr/call_module); use a plain function")
    graph = gm.graph
    matches, taken = [], set()
    for node in graph.nodes:
        m = {}
        if node.op in ("placeholder", "output") or not _match_node(p_anchor, node, m, taken):
            continue
        inner = {g for p, g in m.items() if p.op != "placeholder"}
        if any(u not in inner for g in inner if g is not node for u in g.users):
            continue  # an intermediate value is used elsewhere: the match cannot be removed
        taken |= inner
        matches.append(Match(node, m))

    for match in matches:
        env = {r: match.nodes_map[p] for p, r in zip(p_inputs, r_inputs)}
        with graph.inserting_before(match.anchor):
            for r in r_graph.nodes:
                if r.op == "placeholder":
                    continue
                if r.op == "output":
                    result = env[r.args[0]] if isinstance(r.args[0], Node) else r.args[0]
                    break
                env[r] = graph.node_copy(r, lambda n: env[n])
        match.anchor.replace_all_uses_with(result)
        inner = [g for p, g in match.nodes_map.items() if p.op != "placeholder"]
        order = graph.nodes
        for g in sorted(inner, key=order.index, reverse=True):
            graph.erase_node(g)
    gm.recompile()
    return matches

