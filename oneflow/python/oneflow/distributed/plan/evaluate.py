"""What one layout of a model costs on a mesh: memory per device, bytes moved per step by kind,
step time, TFLOP/s per device and model FLOP utilisation.

    est = evaluate(gpt(...), Mesh(nodes=4, devices_per_node=8), load_profile("a100_80gb"),
                   Layout(tp=2, pp=2, dp=8, micro_batch=2, zero=1, checkpoint=True))
    print(est)                    # the report; est.step_time, est.memory, est.fits ...

The mesh orders ranks as Megatron-LM does: tensor-parallel ranks adjacent (inside a node when
tp <= devices_per_node), then data-parallel, then pipeline stages. Stage k holds its share of
the blocks (the first layers % pp stages one more), the stem on the first, the head on the
last (and, with a tied head, a copy of the tied weights whose gradients the two ends
all-reduce). Time of one step:
    pipeline  m * max_k (f_k + b_k) + (sum_k (f_k + b_k) - max_k (f_k + b_k)) / v   (1F1B and
              GPipe alike; m micro-batches; v model chunks per stage, 1 unless interleaved;
              equal stages give (m + (pp - 1) / v) * (f + b), a bubble of (pp - 1) / (v m +
              pp - 1)); f and b: the stage's ops (roofline: the larger of FLOPs
              at the device's rate and bytes at its memory rate, plus a launch overhead), its
              tensor-parallel collectives, its pipeline send (under tp, 1/tp of the activation
              each, all-gathered over tp: Megatron-LM's scatter/gather), and in b the forward again
              under activation checkpointing; ZeRO-3 gathers each stage's weights forward and
              backward and reduce-scatters its gradients every micro-batch
    dp sync   after the pipeline: gradients all-reduced over dp (ZeRO 1, 2: reduce-scattered,
              then the updated weights all-gathered), nothing overlapped (as Megatron-LM 2021)
    optimizer Adam over this rank's parameters (its 1/dp share under ZeRO) at the memory rate
Memory of stage k: weights, gradients and Adam's state (ZeRO 1 shards the state over dp, 2 also
the gradients, 3 also the weights), and the activations kept for backward: those of
min(m, pp - k) micro-batches in flight under 1F1B (m under GPipe; interleaved: (1 + (pp - 1) /
(pp v)) times as many); with checkpointing only each
block's input, plus one block's full set while it is recomputed.
"""

from dataclasses import dataclass

from oneflow.distributed.plan import collectives as C


class PlanError(ValueError):
    pass


@dataclass(frozen=True)
class Mesh:
    nodes: int
    devices_per_node: int

    def __post_init__(self):
        for what, v in (("nodes", self.nodes), ("devices_per_node", self.devices_per_node)):
            if not isinstance(v, int) or v < 1:
                raise PlanError(f"plan: the mesh needs a positive integer {what}, got {v!r}")

    @property
    def world_size(self):
        return self.nodes * self.devices_per_node

    def __str__(self):
        return f"{self.nodes} nodes x {self.devices_per_node}"


SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batch: int = 1  # samples per micro-batch on one data-parallel rank
    zero: int = 0
    checkpoint: bool = False
    schedule: str = "1f1b"
    chunks: int = 1  # model chunks per pipeline rank: > 1 is the interleaved 1F1B schedule

    def __str__(self):
        chunks = f", {self.chunks} chunks per stage (interleaved)" if self.chunks > 1 else ""
        return (f"tp {self.tp} x pp {self.pp} x dp {self.dp}, micro-batch {self.micro_batch}, "
                f"ZeRO {self.zero}, checkpointing {'on' if self.checkpoint else 'off'}{chunks}")


GiB = float(1 << 30)


def human_bytes(n):
    """1.5 GiB, 12.0 MiB, 300 B: the unit that keeps the figure readable."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def human_count(n):
    """1.01T, 1.65B, 110K parameters."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def human_flops(rate):
    for unit, size in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if abs(rate) >= size:
            return f"{rate / size:.1f} {unit}"
    return f"{rate:.0f} FLOP/s"
# The parts of a step's time, in the order a report prints them.
TIME_PARTS = ("compute", "tp comm", "pp send", "zero-3 gathers", "pipeline bubble", "dp sync",
              "optimizer")


@dataclass
class Estimate:
    model: object
    mesh: Mesh
    profile: object
    layout: Layout
    micro_batches: int
    memory: float  # peak bytes on the fullest device
    memory_parts: dict  # of that device: parameters, gradients, optimizer, activations
    memory_limit: float
    comm_bytes: dict  # (group, kind) -> bytes one device of the busiest stage moves per step
    times: dict  # TIME_PARTS -> seconds
    step_time: float
    model_flops: float
    hardware_flops: float

    @property
    def fits(self):
        return self.memory <= self.memory_limit

    @property
    def tflops_per_device(self):
        """Hardware TFLOP/s per device: matmul FLOPs including recomputation, the convention
        of Narayanan et al. 2021's tables."""
        return self.hardware_flops / self.step_time / self.mesh.world_size / 1e12

    @property
    def mfu(self):
        peak = self.profile.peak(self.model.precision.dtype)
        return self.model_flops / self.step_time / self.mesh.world_size / peak

    def lines(self):
        m, lo, pr = self.model, self.layout, self.profile
        mem = ", ".join(f"{k} {human_bytes(v)}" for k, v in self.memory_parts.items())
        comm = ", ".join(f"{g} {C.SBP_CHANGE[k]} {k} {human_bytes(v)}"
                         for (g, k), v in self.comm_bytes.items() if v)
        t = ", ".join(f"{k} {v:.3g}" for k, v in self.times.items() if v)
        return [
            f"model: {m.name}, {human_count(m.parameters())} parameters, batch {m.batch}, "
            f"{m.precision.dtype}; mesh {self.mesh} = {self.mesh.world_size} x {pr.name}",
            f"layout: {lo} ({self.micro_batches} micro-batches per step, {lo.schedule})",
            f"memory per device: {human_bytes(self.memory)} of {human_bytes(self.memory_limit)}"
            f"{'' if self.fits else ' (OVER THE LIMIT)'} ({mem})",
            f"communication per device per step: {comm or 'none'}",
            f"step time: {self.step_time:.4g} s ({t})",
            f"throughput: {human_flops(self.tflops_per_device * 1e12)} per device "
            f"(matmuls, recomputation included), model FLOP utilisation {100 * self.mfu:.1f}%",
        ]

    def __str__(self):
        return "\n".join(self.lines())


_cache = {}


def _part_cost(part, b, t, profile, dtype, tp_link):
    """(forward compute, backward compute, forward tp comm, backward tp comm, tp comm bytes
    per rank by kind forward and backward, saved bytes, parameters, out bytes) of one part."""
    key = (part, b, t, profile, dtype, tp_link)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    p = part.part(b, t)
    gemm, vec, mem, ovh = profile.gemm_rate(dtype), profile.vector_flops, profile.memory_rate, profile.kernel_overhead_s
    f = bw = 0.0
    for o in p.ops:
        rate = gemm if o.gemm else vec
        f += max(o.flops / rate, o.bytes / mem) + ovh * o.kernels
        bw += max((o.bwd_flops + o.bwd_extra_flops) / rate, o.bwd_bytes / mem) + 2 * ovh * o.kernels
    cf = sum(C.seconds(c, t, tp_link) for c in p.comms if c.phase == "fwd")
    cb = sum(C.seconds(c, t, tp_link) for c in p.comms if c.phase == "bwd")
    vf, vb = {}, {}  # bytes per rank by collective kind
    for c in p.comms:
        v = vf if c.phase == "fwd" else vb
        v[c.kind] = v.get(c.kind, 0.0) + C.bytes_per_rank(c.kind, c.bytes, t)
    hit = (f, bw, cf, cb, vf, vb, sum(o.saved for o in p.ops), p.params, p.out_bytes, p.out_split)
    _cache[key] = hit
    return hit


def check_layout(model, mesh, layout):
    """Raises PlanError (one line) when the layout cannot run the model on the mesh."""
    lo = layout
    for what in ("tp", "pp", "dp", "micro_batch"):
        v = getattr(lo, what)
        if not isinstance(v, int) or v < 1:
            raise PlanError(f"plan: layout needs a positive integer {what}, got {v!r}")
    if lo.tp * lo.pp * lo.dp != mesh.world_size:
        raise PlanError(f"plan: tp {lo.tp} x pp {lo.pp} x dp {lo.dp} = "
                        f"{lo.tp * lo.pp * lo.dp} devices, but the mesh ({mesh}) has "
                        f"{mesh.world_size}")
    why = model.check_tp(lo.tp)
    if why:
        raise PlanError(f"plan: {model.name}: {why}")
    if lo.pp > model.layers:
        raise PlanError(f"plan: pp {lo.pp} is more stages than the {model.layers} blocks")
    if model.batch % (lo.dp * lo.micro_batch):
        raise PlanError(f"plan: batch {model.batch} does not split into dp {lo.dp} x "
                        f"micro-batch {lo.micro_batch}")
    if lo.zero not in (0, 1, 2, 3):
        raise PlanError(f"plan: ZeRO stage must be 0, 1, 2 or 3, got {lo.zero!r}")
    if lo.schedule not in SCHEDULES:
        raise PlanError(f"plan: schedule must be one of {', '.join(SCHEDULES)}, got {lo.schedule!r}")
    if not isinstance(lo.chunks, int) or lo.chunks < 1:
        raise PlanError(f"plan: layout needs a positive integer chunks, got {lo.chunks!r}")
    if lo.chunks > 1:
        m = model.batch // (lo.dp * lo.micro_batch)
        if lo.schedule != "1f1b" or lo.pp < 2 or model.layers % (lo.pp * lo.chunks) or m % lo.pp:
            raise PlanError(f"plan: {lo.chunks} chunks per stage (the interleaved 1F1B schedule) "
                            f"need 1f1b, pp > 1, the {model.layers} blocks divisible by pp x "
                            f"chunks = {lo.pp * lo.chunks} and the {m} micro-batches by pp "
                            f"{lo.pp}")


def evaluate(model, mesh, profile, layout, memory_limit=None, overlap=False,
             transient_grads=False):
    """overlap: communication hidden behind computation where Megatron-LM hides it since 2023
    (--overlap-grad-reduce, --overlap-param-gather, --tp-comm-overlap), at best: a stage's
    tensor-parallel collectives behind its own compute, the dp sync behind the last
    micro-batch's backward; only what exceeds the compute stays on the step.
    transient_grads: gradients live only from backward to the update (nn.Graph's plan: they are
    intermediates), so while backward makes them it frees the activations and the peak holds
    the larger of the two, not both (Megatron-LM keeps a gradient buffer: both); with several
    micro-batches a step's gradients add up while later micro-batches' activations live: both."""
    check_layout(model, mesh, layout)
    lo, pr = layout, model.precision

    def peak(mem):
        if transient_grads and m == 1:  # with micro-batches the gradients add up across them
            return (mem["parameters"] + mem["optimizer"]
                    + max(mem["activations"], mem["gradients"]))
        return sum(mem.values())

    t, p, d, b = lo.tp, lo.pp, lo.dp, lo.micro_batch
    m = model.batch // (d * b)
    dpn, intra, inter = mesh.devices_per_node, profile.intra, profile.inter
    tp_link = C.group_link(t, 1, dpn, intra, inter)
    dp_link = C.group_link(d, t, dpn, intra, inter)
    pp_link = C.group_link(2, t * d, dpn, intra, inter)
    dtype = pr.dtype

    blk = _part_cost(model.block, b, t, profile, dtype, tp_link)
    stem = _part_cost(model.stem, b, t, profile, dtype, tp_link) if model.stem else None
    head = _part_cost(model.head, b, t, profile, dtype, tp_link) if model.head else None
    base, extra = divmod(model.layers, p)
    tied = model.tied_params / t if p > 1 else 0.0

    # Every stage: its blocks, and the stem / head at the ends. Stages that share a shape
    # (the middle ones) are priced once.
    shapes = {}
    for k in range(p):
        key = (base + (k < extra), k == 0, k == p - 1)
        shapes.setdefault(key, []).append(k)
    stage_time, stage_sum, worst = 0.0, 0.0, None
    mem_best, sync_worst, opt_worst = None, 0.0, 0.0
    comm_worst, comm_worst_total = {}, -1.0
    ag = "all_gather"
    for (nb, first, last), ks in shapes.items():
        parts = [(blk, nb)] + ([(stem, 1)] if first and stem else []) + ([(head, 1)] if last and head else [])
        f = sum(c[0] * r for c, r in parts)
        bw = sum(c[1] * r for c, r in parts)
        cf = sum(c[2] * r for c, r in parts)
        cb = sum(c[3] * r for c, r in parts)
        vol = {}  # bytes one rank of this stage moves per step, by (group, kind)
        for c, r in parts:
            for v in (c[4], c[5]):
                for kind, x in v.items():
                    vol[("tp", kind)] = vol.get(("tp", kind), 0.0) + m * r * x
        if lo.checkpoint:  # each block's forward again before its backward
            bw += nb * blk[0]
            cb += nb * blk[2]
            for kind, x in blk[4].items():
                vol[("tp", kind)] += m * nb * x
        params = sum(c[7] * r for c, r in parts) + (tied if last and not first else 0.0)
        send, sent, gathered = 0.0, 0.0, 0.0
        if p > 1:  # this stage's output forward, its input's gradient backward, per chunk
            sent = blk[8]
            if t > 1 and not blk[9]:  # Megatron's scatter/gather: 1/t each, gathered over tp
                sent, gathered = blk[8] / t, blk[8]
            send = 2 * lo.chunks * (C.seconds(C.Comm("send_recv", sent, "pp"), 2, pp_link)
                                    + C.seconds(C.Comm(ag, gathered, "tp"), t, tp_link))
            # Bytes: a stage sends its output forward unless it is the last, its input's
            # gradient backward unless it is the first (interleaved: every chunk both ways); the
            # time above keeps both on every stage (the schedule's slot for them).
            sends = 2 * lo.chunks if lo.chunks > 1 else int(not first) + int(not last)
        z3 = 0.0
        if lo.zero == 3 and d > 1:
            wb = params * pr.param_bytes
            z3 = (2 * C.seconds(C.Comm(ag, wb, "dp"), d, dp_link)
                  + C.seconds(C.Comm("reduce_scatter", params * pr.grad_bytes, "dp"), d, dp_link))
        tpc = max(0.0, cf + cb - f - bw) if overlap else cf + cb
        one = f + bw + tpc + send + z3
        stage_sum += one * len(ks)
        if worst is None or one > stage_time:
            stage_time, worst = one, (f + bw, tpc, send, z3)

        # Gradient synchronisation after the pipeline, and the optimizer step.
        gbytes, wbytes = params * pr.grad_bytes, params * pr.param_bytes
        sync = 0.0
        if d > 1:
            if lo.zero == 0:
                sync = C.seconds(C.Comm("all_reduce", gbytes, "dp"), d, dp_link)
                vol[("dp", "all_reduce")] = C.bytes_per_rank("all_reduce", gbytes, d)
            elif lo.zero in (1, 2):
                sync = (C.seconds(C.Comm("reduce_scatter", gbytes, "dp"), d, dp_link)
                        + C.seconds(C.Comm(ag, wbytes, "dp"), d, dp_link))
                vol[("dp", "reduce_scatter")] = C.bytes_per_rank("reduce_scatter", gbytes, d)
                vol[("dp", ag)] = C.bytes_per_rank(ag, wbytes, d)
            else:
                vol[("dp", "reduce_scatter")] = m * C.bytes_per_rank("reduce_scatter", gbytes, d)
                vol[("dp", ag)] = 2 * m * C.bytes_per_rank(ag, wbytes, d)
        if p > 1:
            vol[("pp", "send_recv")] = max(vol.get(("pp", "send_recv"), 0.0), sends * m * sent)
            if gathered:
                vol[("tp", ag)] = vol.get(("tp", ag), 0.0) + sends * m * C.bytes_per_rank(ag, gathered, t)
            if (first or last) and tied:
                tb = tied * pr.grad_bytes
                sync += C.seconds(C.Comm("all_reduce", tb, "tied"), 2, C.group_link(2, t * d * (p - 1), dpn, intra, inter))
                vol[("tied", "all_reduce")] = C.bytes_per_rank("all_reduce", tb, 2)
        shard = d if lo.zero >= 1 else 1
        opt = params / shard * pr.optimizer_traffic / profile.memory_rate
        if overlap:
            sync = max(0.0, sync - bw)
        sync_worst, opt_worst = max(sync_worst, sync), max(opt_worst, opt)
        total = sum(vol.values())
        if total > comm_worst_total:
            comm_worst, comm_worst_total = vol, total

        # Memory: the fullest stage among these is the one with the most micro-batches in flight.
        k = ks[0]
        in_flight = min(m, p - k) if lo.schedule == "1f1b" else m
        if lo.chunks > 1:  # Narayanan et al.: the first stage keeps (1 + (p-1)/(p v)) as much
            in_flight *= 1 + (p - 1) / (p * lo.chunks)
        saved_ends = sum(c[6] for c, r in parts[1:])
        if lo.checkpoint:
            act = in_flight * (nb * blk[8] + saved_ends) + blk[6]
        else:
            act = in_flight * (nb * blk[6] + saved_ends)
        if lo.zero == 3 and d > 1:
            act += blk[7] * pr.param_bytes  # one block's weights gathered at a time
        mem = {"parameters": wbytes / (d if lo.zero >= 3 else 1),
               "gradients": gbytes / (d if lo.zero >= 2 else 1),
               "optimizer": params * pr.optimizer_bytes / shard,
               "activations": act}
        if mem_best is None or peak(mem) > peak(mem_best):
            mem_best = mem

    pipeline = m * stage_time + (stage_sum - stage_time) / lo.chunks
    compute, tp_comm, send, z3 = (m * x for x in worst)
    times = dict(zip(TIME_PARTS, (compute, tp_comm, send, z3, pipeline - m * stage_time,
                                  sync_worst, opt_worst)))
    step = pipeline + sync_worst + opt_worst
    limit = profile.memory_limit if memory_limit is None else float(memory_limit)
    mf = model.model_flops()
    hf = mf + (model.recompute_flops() if lo.checkpoint else 0.0)
    return Estimate(model, mesh, profile, lo, m, peak(mem_best), mem_best, limit,
                    comm_worst, times, step, mf, hf)
