"""Every layout of a model on a mesh, the fastest that fits, and why the next best lost.

    r = search(gpt(...), Mesh(384, 8), load_profile("a100_80gb"))
    r.best, r.runner_up           # Estimates; r.why: one line; print(r) shows all three

The space: tp dividing what the model needs divided (heads, vocabulary...), pp up to the
number of blocks, dp the rest of the mesh and dividing the batch, every micro-batch size that
divides the batch's share of a data-parallel rank, ZeRO 0 to 3 (only 0 without dp), activation
checkpointing off and on, 1 to 8 model chunks per stage (interleaved 1F1B where the blocks and
micro-batches divide), the 1F1B schedule (GPipe has the same bubble and more activations in
this model, so it never wins; evaluate() still prices it). `fixed` pins any of Layout's fields.
The runner-up is the fastest plan that fits on another (tp, pp, dp) mesh shape (the fastest
other plan when there is none), so "why it lost" compares two shapes.
"""

import time
from dataclasses import dataclass, fields

from oneflow.distributed.plan.evaluate import (TIME_PARTS, Layout, PlanError, evaluate, human_bytes,
                                               human_flops)

_FIELDS = tuple(f.name for f in fields(Layout))
MAX_CHUNKS = 8  # model chunks per stage the search tries (interleaved 1F1B)


def _divisors(n):
    small = [i for i in range(1, int(n ** 0.5) + 1) if n % i == 0]
    return sorted(set(small + [n // i for i in small]))


def layouts(model, mesh, fixed=None):
    """The candidate layouts (Layout values), `fixed` pinning fields by name."""
    fixed = dict(fixed or {})
    bad = sorted(set(fixed) - set(_FIELDS))
    if bad:
        raise PlanError(f"plan: search cannot fix {', '.join(bad)}; it fixes {', '.join(_FIELDS)}")
    n = mesh.world_size

    def pick(name, options):
        return [fixed[name]] if name in fixed else options

    for t in pick("tp", _divisors(n)):
        if n % t or model.check_tp(t):
            continue
        for p in pick("pp", _divisors(n // t)):
            if (n // t) % p or p > model.layers:
                continue
            d = n // (t * p)
            if "dp" in fixed and fixed["dp"] != d or model.batch % d:
                continue
            schedule = fixed.get("schedule", "1f1b")
            for b in pick("micro_batch", _divisors(model.batch // d)):
                m = model.batch // (d * b)
                chunks = [v for v in _divisors(model.layers // p) if v <= MAX_CHUNKS and
                          (v == 1 or (schedule == "1f1b" and p > 1 and m % p == 0
                                      and model.layers % (p * v) == 0))]
                for v in pick("chunks", chunks):
                    for z in pick("zero", [0, 1, 2, 3] if d > 1 else [0]):
                        for ck in pick("checkpoint", [False, True]):
                            yield Layout(t, p, d, b, z, ck, schedule, v)


@dataclass
class SearchResult:
    best: object
    runner_up: object
    why: str
    evaluated: int
    over_limit: int
    seconds: float

    def __str__(self):
        out = [f"searched {self.evaluated} layouts in {self.seconds:.2f} s "
               f"({self.over_limit} over the memory limit)", "best:"]
        out += ["  " + x for x in self.best.lines()]
        if self.runner_up is not None:
            out += [f"runner-up: {self.runner_up.layout}: {self.runner_up.step_time:.4g} s, "
                    f"{human_flops(self.runner_up.tflops_per_device * 1e12)} per device, "
                    f"{human_bytes(self.runner_up.memory)}", f"why it lost: {self.why}"]
        return "\n".join(out)


def why_lost(best, other):
    """One line: how much slower `other` is, and the parts of the step that make the gap."""
    gap = other.step_time - best.step_time
    deltas = sorted(((other.times[k] - best.times[k], k) for k in TIME_PARTS), reverse=True)
    worse = [f"{k} +{d:.3g} s" for d, k in deltas if d > 0.05 * max(gap, 1e-12)][:3]
    better = [f"{k} {d:.3g} s" for d, k in deltas[::-1] if d < -0.05 * max(gap, 1e-12)][:2]
    line = f"{100 * gap / best.step_time:.1f}% slower per step ({other.step_time:.4g} s vs {best.step_time:.4g} s)"
    if worse:
        line += ": " + ", ".join(worse)
    if better:
        line += "; it gains " + ", ".join(better)
    return line


def search(model, mesh, profile, memory_limit=None, fixed=None, overlap=False):
    start = time.perf_counter()
    fitting, evaluated, over, smallest = [], 0, 0, None
    for lo in layouts(model, mesh, fixed):
        est = evaluate(model, mesh, profile, lo, memory_limit, overlap)
        evaluated += 1
        if est.fits:
            fitting.append(est)
        else:
            over += 1
            if smallest is None or est.memory < smallest.memory:
                smallest = est
    if not evaluated:
        raise PlanError(f"plan: no layout of {model.name} (batch {model.batch}) runs on "
                        f"{mesh.world_size} devices{' with ' + str(fixed) if fixed else ''}")
    if not fitting:
        raise PlanError(f"plan: no layout of {model.name} fits {human_bytes(smallest.memory_limit)} "
                        f"per device on {mesh.world_size} devices; the smallest needs "
                        f"{human_bytes(smallest.memory)} ({smallest.layout})")
    fitting.sort(key=lambda e: e.step_time)
    best = fitting[0]
    shape = (best.layout.tp, best.layout.pp, best.layout.dp)
    other = [e for e in fitting[1:] if (e.layout.tp, e.layout.pp, e.layout.dp) != shape]
    runner = other[0] if other else (fitting[1] if len(fitting) > 1 else None)
    why = why_lost(best, runner) if runner is not None else ""
    return SearchResult(best, runner, why, evaluated, over, time.perf_counter() - start)
