"""Pipeline parallelism over placements: stages on different ranks, micro-batches, GPipe or 1F1B.

    P0, P1 = flow.placement("cpu", ranks=[0]), flow.placement("cpu", ranks=[1])
    pipe = flow.nn.parallel.Pipeline(
        [stage0, stage1], [P0, P1], loss_fn=nn.MSELoss(), num_micro_batches=4, schedule="1f1b")
    opt = flow.optim.SGD(pipe.parameters(), lr=0.1)
    for x, y in data:                        # x global on P0, y global on P1
        opt.zero_grad()
        loss = pipe.train_step(x, y)         # forward + backward of every micro-batch
        opt.step()

Each stage module is moved to its placement (parameters broadcast there, or a DP group per
stage: a placement of several ranks, with the batch split(0) over them). Every rank runs the same
program; the ops of a stage run only on the ranks of its placement (on the others they are
no-ops that return empty shards), so what a rank computes is its own stage's work.

Between stages an activation moves by a placement change, h.detach().to_global(placement=next,
sbp=...), and its gradient moves back the same way, h_next.grad.to_global(placement=this one);
each stage's backward is its own h.backward(grad) call, so backward passes of one stage can be
interleaved with forward passes of others (1F1B). The schedule is written as one program order
for all ranks: every stage's own action list (GPipe: all forwards, then all backwards; 1F1B:
p - s - 1 warm-up forwards, then one forward and one backward alternately, then the remaining
backwards) is timed on an ideal clock (forward 1, backward 2) and the actions of all stages are
issued in the order of that clock, each transfer at the time its producer ends. A transfer is
a rendezvous of its sender and receiver (the gloo Send returns once the Recv is posted), so a
rank blocks at a transfer until its peer reaches it; issued in clock order, each stage reaches
its transfers when the ideal schedule says and the stages overlap as the schedule intends.

The loss of a micro-batch is loss_fn(output, target) / num_micro_batches, so the accumulated
gradient is that of the mean over the whole batch when loss_fn averages over its batch and the
micro-batches are of one size. train_step returns the mean loss (detached, a global tensor on
the last stage's placement). last_timing holds this rank's busy seconds (its stages' forward
and backward), transfer seconds (waits included) and the step's wall time.
"""

import time

import oneflow as flow
from oneflow.nn.modules.module import Module

_SCHEDULES = ("gpipe", "1f1b")


def _stage_actions(schedule, s, p, m):
    """Stage s's own order of ('F'|'B', micro-batch)."""
    if schedule == "gpipe":
        return [("F", k) for k in range(m)] + [("B", k) for k in range(m)]
    warm = min(p - s - 1, m)
    out = [("F", k) for k in range(warm)]
    f, b = warm, 0
    while f < m:
        out.append(("F", f))
        f += 1
        out.append(("B", b))
        b += 1
    out += [("B", k) for k in range(b, m)]
    return out


def program(schedule, p, m, forward_time=1.0, backward_time=2.0):
    """The schedule as one program order for every rank, from the ideal clock.

    Returns a list of ('F', s, k), ('B', s, k), ('A', s, k) (the activation of micro-batch k
    from stage s to s + 1) and ('G', s, k) (its gradient from stage s + 1 back to s), and the
    ideal makespan on that clock."""
    if schedule not in _SCHEDULES:
        raise ValueError(f"Pipeline: schedule must be one of {_SCHEDULES}, got {schedule!r}")
    lists = [_stage_actions(schedule, s, p, m) for s in range(p)]
    pos = [0] * p
    free = [0.0] * p  # when each stage's ranks are free on the ideal clock
    done = {}  # ('F'|'B', s, k) -> end time
    events = []  # (time, order, action)
    order = 0
    remaining = sum(len(a) for a in lists)
    while remaining:
        progressed = False
        for s in range(p):
            if pos[s] == len(lists[s]):
                continue
            kind, k = lists[s][pos[s]]
            if kind == "F":
                dep = done.get(("F", s - 1, k)) if s > 0 else 0.0
            else:
                dep = done.get(("B", s + 1, k)) if s < p - 1 else done.get(("F", s, k))
            if dep is None:
                continue
            start = max(free[s], dep)
            end = start + (forward_time if kind == "F" else backward_time)
            done[(kind, s, k)] = end
            free[s] = end
            # Transfers sort before computations at the same time (kind rank 0 < 1).
            events.append((start, 1, order, (kind, s, k)))
            order += 1
            if kind == "F" and s < p - 1:
                events.append((end, 0, order, ("A", s, k)))
                order += 1
            if kind == "B" and s > 0:
                events.append((end, 0, order, ("G", s - 1, k)))
                order += 1
            pos[s] += 1
            remaining -= 1
            progressed = True
        if not progressed:  # pragma: no cover (the lists above always make progress)
            raise RuntimeError("Pipeline: the schedule deadlocks")
    events.sort()
    return [e[3] for e in events], max(free)


def ideal_bubble(p, m):
    """The idle fraction of GPipe and 1F1B with equal stages: (p - 1) / (m + p - 1)."""
    return (p - 1) / (m + p - 1)


class Pipeline(Module):
    def __init__(self, stages, placements, loss_fn, num_micro_batches, schedule="1f1b",
                 activation_sbp=None):
        super().__init__()
        stages, placements = list(stages), list(placements)
        if len(stages) < 2:
            raise ValueError(f"Pipeline: needs at least 2 stages, got {len(stages)}")
        if len(stages) != len(placements):
            raise ValueError(
                f"Pipeline: got {len(stages)} stages but {len(placements)} placements (one each)")
        for i, pl in enumerate(placements):
            if not isinstance(pl, flow.placement):
                raise TypeError(f"Pipeline: placement {i} must be a flow.placement, got {pl!r}")
            if len(pl.hierarchy) != 1:
                raise NotImplementedError(
                    f"Pipeline: placement {i} has hierarchy {pl.hierarchy}; only 1-D placements "
                    "(one data-parallel group per stage) are supported")
        if not isinstance(num_micro_batches, int) or num_micro_batches < 1:
            raise ValueError(f"Pipeline: num_micro_batches must be an int >= 1, got {num_micro_batches!r}")
        if schedule not in _SCHEDULES:
            raise ValueError(f"Pipeline: schedule must be one of {_SCHEDULES}, got {schedule!r}")
        self.stages = flow.nn.ModuleList(
            [st.to_global(placement=pl, sbp=flow.sbp.broadcast) for st, pl in zip(stages, placements)])
        self.placements = placements
        self.loss_fn = loss_fn
        self.num_micro_batches = num_micro_batches
        self.schedule = schedule
        # Activations on a stage of several ranks are split(0) over them (data parallel).
        self.activation_sbp = activation_sbp
        self._program, self._ideal_makespan = program(schedule, len(stages), num_micro_batches)
        self.last_timing = None
        # Set to True to keep (action, stage, micro-batch, start, end) of every action of the
        # last step in last_timing["trace"] (perf_counter seconds).
        self.trace = False
        self._rank = flow.env.get_rank()

    def _sbp_on(self, pl):
        if self.activation_sbp is not None:
            return self.activation_sbp
        return flow.sbp.split(0) if pl.ranks.size > 1 else flow.sbp.broadcast

    def _chunks(self, t, pl, what):
        m = self.num_micro_batches
        if not (isinstance(t, flow.Tensor) and t.is_global and t.placement == pl):
            got = f"placement {t.placement}" if isinstance(t, flow.Tensor) and t.is_global else \
                "a local tensor" if isinstance(t, flow.Tensor) else type(t).__name__
            raise ValueError(f"Pipeline.train_step: {what} must be a global tensor on {pl}, got {got}")
        sbp = tuple(t.sbp)
        if sbp not in ((flow.sbp.broadcast,), (flow.sbp.split(0),)):
            raise ValueError(
                f"Pipeline.train_step: {what} must be broadcast or split(0), got sbp {sbp}")
        local = t.to_local()
        member = self._rank in pl.ranks.flatten().tolist()
        if member and local.shape[0] % m != 0:
            raise ValueError(
                f"Pipeline.train_step: {what} has {local.shape[0]} rows on rank {self._rank}, "
                f"not divisible into {m} micro-batches")
        if sbp == (flow.sbp.broadcast,):
            size = t.shape[0] // m
            return [t[k * size:(k + 1) * size] for k in range(m)]
        # split(0): every rank's k-th micro-batch is the k-th chunk of its own rows (no
        # communication; over all micro-batches each row is used once).
        shape = list(t.shape)
        shape[0] //= m
        out = []
        for k in range(m):
            piece = local[k * (local.shape[0] // m):(k + 1) * (local.shape[0] // m)] if member \
                else local
            out.append(piece.to_global(placement=pl, sbp=t.sbp))
        return out

    def train_step(self, x, target):
        """Forward and backward of every micro-batch of (x, target); gradients accumulate into
        the stages' parameters. x on the first stage's placement, target on the last's."""
        p, m = len(self.stages), self.num_micro_batches
        xs = self._chunks(x, self.placements[0], "the input")
        ys = self._chunks(target, self.placements[-1], "the target")
        ins = {}  # (s, k) -> the stage's input (a leaf for s > 0)
        outs = {}  # (s, k) -> the stage's output (the scaled loss on the last stage)
        grads = {}  # (s, k) -> the gradient of outs[(s, k)] received from stage s + 1
        losses = []
        busy = comm = 0.0
        trace = [] if self.trace else None
        member = [self._rank in pl.ranks.flatten().tolist() for pl in self.placements]
        t_start = time.perf_counter()
        for kind, s, k in self._program:
            t0 = time.perf_counter()
            if kind == "F":
                h = xs[k] if s == 0 else ins[(s, k)]
                out = self.stages[s](h)
                if s == p - 1:
                    loss = self.loss_fn(out, ys[k])
                    losses.append(loss.detach())
                    out = loss / m
                outs[(s, k)] = out
            elif kind == "B":
                if s == p - 1:
                    outs.pop((s, k)).backward()
                else:
                    outs.pop((s, k)).backward(grads.pop((s, k)))
            elif kind == "A":
                nxt = self.placements[s + 1]
                h = outs[(s, k)].detach().to_global(placement=nxt, sbp=self._sbp_on(nxt))
                ins[(s + 1, k)] = h.requires_grad_()
            else:  # "G"
                leaf = ins.pop((s + 1, k))
                g = leaf.grad if leaf.grad is not None else flow.zeros_like(leaf)
                grads[(s, k)] = g.to_global(placement=self.placements[s], sbp=outs[(s, k)].sbp)
            dt = time.perf_counter() - t0
            if trace is not None:
                trace.append((kind, s, k, t0, t0 + dt))
            if kind in ("F", "B"):
                if member[s]:
                    busy += dt
            elif member[s] or member[s + 1]:
                comm += dt
        wall = time.perf_counter() - t_start
        self.last_timing = {"wall": wall, "busy": busy, "transfer": comm,
                            "bubble": 1.0 - busy / wall if wall > 0 else 0.0, "trace": trace}
        total = losses[0]
        for loss in losses[1:]:
            total = total + loss
        return total / m

    def forward(self, x):
        """Inference: the stages one after the other, activations handed over by placement."""
        h = x
        for s, stage in enumerate(self.stages):
            if s > 0:
                pl = self.placements[s]
                h = h.to_global(placement=pl, sbp=self._sbp_on(pl))
            h = stage(h)
        return h
