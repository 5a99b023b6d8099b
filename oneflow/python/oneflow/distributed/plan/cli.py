"""The planner's command line and its one-call Python form.

    python3 -m oneflow.distributed.plan --layers 128 --hidden 25600 --heads 160 --vocab 51200 \
        --seq 2048 --batch 3072 --nodes 384 --devices_per_node 8 --profile a100_80gb
            # searches every layout; --tp/--pp/--dp (any of them) evaluate one instead
    python3 -m oneflow.distributed.plan --measure-profile cpu.json   # this machine's profile

    plan(layers=24, hidden=2304, heads=24, vocab=51200, seq=2048, batch=512, nodes=4)
    plan(..., tp=2, pp=2)        # an Estimate (one layout) instead of a SearchResult

examples/gpt.py's argument names work too (--n_layer, --n_embd, --n_head, --block_size,
--batch_size). In a search, --micro_batch, --zero, --checkpoint / --no-checkpoint, --schedule
and --chunks pin those fields.
"""

import argparse
import sys

from oneflow.distributed.plan.evaluate import GiB, Layout, Mesh, PlanError, evaluate
from oneflow.distributed.plan.hardware import load_profile, shipped
from oneflow.distributed.plan.models import gpt
from oneflow.distributed.plan.search import search

_MODEL = (("layers", "--n_layer"), ("hidden", "--n_embd"), ("heads", "--n_head"),
          ("vocab", "--vocab_size"), ("seq", "--block_size"), ("batch", "--batch_size"))


def plan(layers, hidden, heads, vocab, seq, batch, nodes=1, devices_per_node=8,
         profile="a100_80gb", dtype="bf16", memory_limit=None, tp=None, pp=None, dp=None,
         micro_batch=None, zero=None, checkpoint=None, schedule=None, chunks=None,
         flash_attention=False,
         sequence_parallel=False, overlap=False):
    """A GPT on a virtual mesh: evaluate one layout when any of tp, pp, dp is given (the others
    default to 1, dp to the rest of the mesh), else search them all (the given fields pinned).
    memory_limit: bytes per device (default: the profile's memory less its reserve).
    flash_attention, sequence_parallel: models.gpt's; overlap: evaluate's."""
    model = gpt(layers, hidden, heads, vocab, seq, batch, dtype=dtype,
                flash_attention=flash_attention, sequence_parallel=sequence_parallel)
    mesh = Mesh(nodes, devices_per_node)
    prof = load_profile(profile)
    pins = {k: v for k, v in (("micro_batch", micro_batch), ("zero", zero),
                              ("checkpoint", checkpoint), ("schedule", schedule),
                              ("chunks", chunks)) if v is not None}
    if tp is None and pp is None and dp is None:
        return search(model, mesh, prof, memory_limit, pins, overlap)
    tp, pp = (1 if tp is None else tp), (1 if pp is None else pp)
    for what, v in (("tp", tp), ("pp", pp)):
        if not isinstance(v, int) or v < 1:
            raise PlanError(f"plan: layout needs a positive integer {what}, got {v!r}")
    if dp is None:
        if mesh.world_size % (tp * pp):
            raise PlanError(f"plan: tp {tp} x pp {pp} does not divide the mesh's "
                            f"{mesh.world_size} devices")
        dp = mesh.world_size // (tp * pp)
    defaults = {"micro_batch": 1, "zero": 0, "checkpoint": False, "schedule": "1f1b", "chunks": 1}
    defaults.update(pins)
    return evaluate(model, mesh, prof, Layout(tp, pp, dp, **defaults), memory_limit, overlap)


def parser():
    ap = argparse.ArgumentParser(prog="python3 -m oneflow.distributed.plan",
                                 description="What a GPT training job costs on a virtual mesh: "
                                 "evaluate one layout, or search them all.")
    g = ap.add_argument_group("model (a GPT; examples/gpt.py's names work too)")
    for name, alias in _MODEL:
        g.add_argument(f"--{name}", alias, dest=name, type=int)
    g.add_argument("--dtype", default="bf16", help="compute dtype: bf16, fp16 (mixed "
                   "precision) or fp32")
    g.add_argument("--flash_attention", action="store_true",
                   help="the attention core as one fused kernel (default: Megatron-LM 2021's)")
    g.add_argument("--sequence_parallel", action="store_true",
                   help="the ops outside TP's split on 1/tp of the tokens (Korthikanti et al.)")
    g = ap.add_argument_group("mesh and hardware")
    g.add_argument("--nodes", type=int, default=1)
    g.add_argument("--devices_per_node", type=int, default=8)
    g.add_argument("--profile", default="a100_80gb",
                   help=f"a shipped profile ({', '.join(shipped())}) or a JSON file")
    g.add_argument("--memory_limit_gib", type=float,
                   help="memory per device (default: the profile's, less its reserve)")
    g = ap.add_argument_group("layout (any of --tp/--pp/--dp: evaluate it; none: search)")
    for name in ("tp", "pp", "dp", "micro_batch", "zero"):
        g.add_argument(f"--{name}", type=int)
    g.add_argument("--chunks", type=int, help="model chunks per pipeline stage (above 1: the "
                   "interleaved 1F1B schedule)")
    g.add_argument("--checkpoint", action=argparse.BooleanOptionalAction, default=None,
                   help="activation checkpointing (recompute each block in backward)")
    g.add_argument("--schedule", choices=("1f1b", "gpipe"))
    g.add_argument("--overlap", action="store_true", help="communication hidden behind "
                   "computation where Megatron-LM hides it (at best)")
    ap.add_argument("--measure-profile", "--measure_profile", dest="measure_profile",
                    metavar="OUT.json", help="measure this machine's profile (2 local CPU ranks "
                    "through the launcher) and write it to OUT.json")
    return ap


def main(argv=None, out=sys.stdout):
    args = parser().parse_args(argv)
    if args.measure_profile:
        from oneflow.distributed.plan import measure  # starts processes: only when asked
        measure.main(args.measure_profile, out)
        return 0
    missing = [f"--{n}" for n, _ in _MODEL if getattr(args, n) is None]
    if missing:
        print(f"plan: the model needs {', '.join(missing)}", file=sys.stderr)
        return 2
    limit = None if args.memory_limit_gib is None else args.memory_limit_gib * GiB
    try:
        r = plan(*(getattr(args, n) for n, _ in _MODEL), nodes=args.nodes,
                 devices_per_node=args.devices_per_node, profile=args.profile, dtype=args.dtype,
                 memory_limit=limit, tp=args.tp, pp=args.pp, dp=args.dp,
                 micro_batch=args.micro_batch, zero=args.zero, checkpoint=args.checkpoint,
                 schedule=args.schedule, chunks=args.chunks, flash_attention=args.flash_attention,
                 sequence_parallel=args.sequence_parallel, overlap=args.overlap)
    except (PlanError, ValueError) as e:
        print(str(e), file=sys.stderr)
        return 2
    print(r, file=out)
    return 0
