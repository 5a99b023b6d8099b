"""examples/gpt.py under layouts, against one-process training from the same weights.

    usage: gpt_parallel.py LAYOUT[,LAYOUT...] [--save DIR] [--load DIR] [--probe] [--cuda]
A LAYOUT is a --parallel value with an optional ':ckpt' (activation checkpointing in the
layout's model, not in the reference). --cuda: the layouts on cuda placements (the reference
stays a CPU process). Every rank trains the reference (local tensors, one
process's arithmetic) and then each layout for 10 steps on the same fortune batches, from the
same weights (2 layers, 4 heads, n_embd 32, block 16, batch 4, AdamW), and checks on every rank:
the loss of every step and every parameter after the last step equal the reference's (1e-4).
--save DIR: after the first layout, its state_dict is saved sharded to DIR and rank 0 writes the
whole values to DIR.npz. --load DIR: a model under the last layout (other initial weights) loads
DIR and must hold exactly DIR.npz. --probe: the forward and backward of one block of the first
layout's model between marker lines on stderr (read with ONEFLOW_DEBUG_BOXING=1).
"""

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import oneflow as flow  # noqa: E402
import gpt  # noqa: E402

layouts = sys.argv[1].split(",")
opts = sys.argv[2:]
save = opts[opts.index("--save") + 1] if "--save" in opts else None
load = opts[opts.index("--load") + 1] if "--load" in opts else None
probe = "--probe" in opts
device = "cuda" if "--cuda" in opts else "cpu"
rank, world = flow.env.get_rank(), flow.env.get_world_size()
STEPS, TOL = 10, 1e-4
SIZES = ["--n_layer", "2", "--n_head", "4", "--n_embd", "32", "--block_size", "16",
         "--batch_size", "4", "--lr", "3e-3"]

data = gpt.CharData(gpt.read_fortunes())
batches = [data.batch("train", 4, 16, 100 + s) for s in range(STEPS)]


def args_for(parallel, ckpt, untied):
    on = "cpu" if parallel == "none" else device
    return gpt.parser().parse_args(SIZES + ["--parallel", parallel] + ["--checkpoint"] * ckpt
                                   + ["--untied"] * untied + ["--device", on])


def train(parallel, ckpt, untied):
    args = args_for(parallel, ckpt, untied)
    model, layout = gpt.build(args, data.vocab_size, world if parallel != "none" else 1)
    trainer = gpt.Trainer(model, layout, lr=args.lr)
    losses = [float(layout.whole(trainer.step(x, y))) for x, y in batches]
    params = {n: layout.whole(p) for n, p in model.named_parameters()}
    return trainer, losses, params


references = {}
first = None
for spec in layouts:
    parallel, _, flag = spec.partition(":")
    untied = parallel.startswith("pp")
    if untied not in references:
        references[untied] = train("none", False, untied)[1:]
    ref_losses, ref_params = references[untied]
    trainer, losses, params = train(parallel, flag == "ckpt", untied)
    first = first or trainer
    for step, (got, want) in enumerate(zip(losses, ref_losses)):
        assert abs(got - want) < TOL, (spec, step, got, want)
    assert sorted(params) == sorted(ref_params), (spec, sorted(params))
    for name, value in params.items():
        err = float(np.abs(value - ref_params[name]).max())
        assert err < TOL, (spec, name, err)
    if parallel.startswith("pp"):
        from oneflow.nn.parallel.pipeline import ideal_bubble
        print(f"rank {rank} {spec} bubble {trainer.pipe.last_timing['bubble']:.3f} ideal "
              f"{ideal_bubble(2, trainer.layout.micro_batches):.3f}", flush=True)
    print(f"rank {rank} {spec} optimizer state {trainer.optimizer_state_bytes()} bytes",
          flush=True)
    print(f"rank {rank} of {world} {spec} ok", flush=True)

if save:
    state = first.model.state_dict()
    flow.save(state, save, sharded=True)
    whole = {k: first.layout.whole(v) for k, v in state.items()}
    if rank == 0:
        np.savez(save + ".npz", **whole)
    print(f"rank {rank} of {world} saved ok", flush=True)

if load:
    args = args_for(layouts[-1].partition(":")[0], False, False)
    args.seed = 99
    model, layout = gpt.build(args, data.vocab_size, world)
    gpt.Trainer(model, layout)  # places the model
    model.load_state_dict(flow.load(load))
    expected = np.load(load + ".npz")
    state = model.state_dict()
    assert sorted(state) == sorted(expected.files), (sorted(state), expected.files)
    for k, v in state.items():
        assert tuple(v.sbp) == layout.sbp_of(k), (k, v.sbp)
        assert np.array_equal(layout.whole(v), expected[k]), k
    print(f"rank {rank} of {world} loaded ok", flush=True)

if probe:
    # One block's forward and backward as the model runs it: its input is the embedding's
    # output (under tp a partial sum, as every block's input is).
    model, layout = first.model, first.layout
    x, _ = batches[0]
    h = model.embed(layout.data(x)).detach().requires_grad_()
    flow.comm.barrier()
    print("== block forward ==", file=sys.stderr, flush=True)
    out = model.h[0](h)
    print("== block backward ==", file=sys.stderr, flush=True)
    out.backward(flow.ones(*out.shape).to_global(placement=out.placement, sbp=flow.sbp.broadcast))
    print("== end ==", file=sys.stderr, flush=True)
    print(f"rank {rank} of {world} probe ok (input {tuple(h.sbp)}, output {tuple(out.sbp)}, "
          f"input grad {tuple(h.grad.sbp)})", flush=True)
