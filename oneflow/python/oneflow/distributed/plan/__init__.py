"""oneflow.distributed.plan: what a training job costs on a cluster you do not have.

    from oneflow.distributed.plan import gpt, Mesh, Layout, evaluate, search, load_profile
    model = gpt(layers=24, hidden=2304, heads=24, vocab=51200, seq=2048, batch=512)
    print(evaluate(model, Mesh(4, 8), load_profile("a100_80gb"), Layout(tp=1, pp=1, dp=32)))
    print(search(model, Mesh(4, 8), load_profile("a100_80gb")))   # the best layout that fits

    python3 -m oneflow.distributed.plan --layers 24 --hidden 2304 --heads 24 --nodes 4 ...

Leaf modules, bottom up: ops (one op's FLOPs and bytes), collectives (the boxing table's bytes,
ring times), hardware (profiles, profiles/*.json), models (a model as stem + block x layers +
head), evaluate (one layout: memory, communication, step time), search (every layout),
measure (this machine's profile), cli.
"""

from oneflow.distributed.plan.evaluate import Estimate, Layout, Mesh, PlanError, evaluate
from oneflow.distributed.plan.hardware import Profile, load_profile, shipped
from oneflow.distributed.plan.models import ModelSpec, gpt, mlp
from oneflow.distributed.plan.search import SearchResult, search
from oneflow.distributed.plan.cli import plan

__all__ = ["Estimate", "plan", "Layout", "Mesh", "ModelSpec", "PlanError", "Profile", "SearchResult",
           "evaluate", "gpt", "load_profile", "mlp", "search", "shipped"]
