"""The planner against a published table: Narayanan et al. 2021 (Megatron-LM, arXiv 2104.04473),
Table 1, GPT models from 1.7B to 1T parameters on up to 3,072 A100 80GB GPUs.

    tools/python tools/bench/plan_megatron.py            # a Markdown table (README's)
    tools/python tools/bench/plan_megatron.py --table h100   # Megatron-LM's July 2024 H100 table

For every row: the per-GPU TFLOP/s the planner predicts for the published layout (TP = min(8,
model-parallel size), PP = the rest of it, DP = GPUs / model-parallel size, the published
batch; activation checkpointing on and no ZeRO, as in the paper; the micro-batch size and the model chunks per stage
(interleaved 1F1B when above 1), which the table does not give, are the planner's best for that
layout), against the published figure, and
the plan the search finds (any tp, pp, dp, micro-batch, ZeRO, checkpointing that fits) with its
predicted throughput. One profile (a100_80gb), one model, no constant set per row.
TFLOP/s per GPU counts the matmuls' FLOPs including recomputation, as the paper does; the
search is judged by step time (model FLOPs per second), since a plan that recomputes less does
fewer hardware FLOPs for the same step.
"""

import argparse
import time

from oneflow.distributed.plan import Mesh, gpt, load_profile, search

# model, hidden, layers, heads, model-parallel size, GPUs, batch, published TFLOP/s per GPU.
# The figures are the paper's (Table 1; the heads from the same table); vocabulary 51,200,
# sequence 2,048, fp16.
ROWS = [
    ("1.7B", 2304, 24, 24, 1, 32, 512, 137),
    ("3.6B", 3072, 30, 32, 2, 64, 512, 138),
    ("7.5B", 4096, 36, 32, 4, 128, 512, 142),
    ("18B", 6144, 40, 48, 8, 256, 1024, 135),
    ("39B", 8192, 48, 64, 16, 512, 1536, 138),
    ("76B", 10240, 60, 80, 32, 1024, 1792, 140),
    ("145B", 12288, 80, 96, 64, 1536, 2304, 148),
    ("310B", 16384, 96, 128, 128, 1920, 2160, 155),
    ("530B", 20480, 105, 128, 280, 2520, 2520, 163),
    ("1T", 25600, 128, 160, 512, 3072, 3072, 163),
]
VOCAB, SEQ = 51200, 2048

# Megatron-LM's README, July 2024 (H100 SXM, vocabulary 131,072, sequence 4,096, bf16,
# communication overlapped): heads, hidden, layers, TP, PP, DP, batch, published TFLOP/s per
# GPU (model FLOPs: MFU x 989).
H100_ROWS = [
    ("1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8),
    ("7.1B", 32, 4096, 30, 2, 1, 48, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 489.1),
    ("32B", 56, 7168, 48, 8, 1, 48, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 48, 384, 419.7),
    ("119B", 80, 10240, 92, 8, 4, 48, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 48, 1152, 432.8),
    ("314B", 128, 16384, 96, 8, 8, 48, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 48, 3072, 459.9),
]


def h100(prof):
    """The July 2024 rows with the features those runs used: flash attention, sequence
    parallelism, the distributed optimizer (ZeRO 1), communication overlapped (at best);
    micro-batch, chunks per stage and checkpointing (off or full; selective recomputation is not
    modelled) the planner's best for the published layout. TFLOP/s: model FLOPs, as that table counts them."""
    print("| model | layout (tp x pp x dp) | published TFLOP/s | predicted | error | "
          "micro-batch, chunks, checkpointing |")
    print("|---|---|---|---|---|---|")
    errors = []
    for name, a, h, l, tp, pp, dp, batch, published in H100_ROWS:
        model = gpt(l, h, a, 131072, 4096, batch, dtype="bf16", name=f"GPT-{name}",
                    flash_attention=True, sequence_parallel=True)
        mesh = Mesh(tp * pp * dp // 8, 8)
        est = search(model, mesh, prof, fixed={"tp": tp, "pp": pp, "dp": dp, "zero": 1},
                     overlap=True).best
        got = est.model_flops / est.step_time / mesh.world_size / 1e12
        err = (got - published) / published
        errors.append(abs(err))
        print(f"| {name} | {tp} x {pp} x {dp} | {published} | {got:.0f} | {100 * err:+.0f}% | "
              f"{est.layout.micro_batch}, {est.layout.chunks}, "
              f"{'on' if est.layout.checkpoint else 'off'} |")
    print(f"\nmean |error| {100 * sum(errors) / len(errors):.1f}%, "
          f"worst {100 * max(errors):.1f}% ({prof.name} profile)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", choices=("a100", "h100"), default="a100")
    ap.add_argument("--profile", help="default: a100_80gb, h100_sxm for --table h100")
    ap.add_argument("--rows", help="only these rows (comma-separated names, e.g. 1T,530B)")
    args = ap.parse_args()
    if args.table == "h100":
        return h100(load_profile(args.profile or "h100_sxm"))
    prof = load_profile(args.profile or "a100_80gb")
    rows = ROWS if not args.rows else [r for r in ROWS if r[0] in args.rows.split(",")]
    print("| model | published layout (tp x pp x dp, micro-batch, chunks) | published TFLOP/s | "
          "predicted | error | plan found | its TFLOP/s | step time vs published layout | "
          "search time |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors = []
    for name, h, l, a, mp, gpus, batch, published in rows:
        model = gpt(l, h, a, VOCAB, SEQ, batch, dtype="fp16", name=f"GPT-{name}")
        mesh = Mesh(gpus // 8, 8)
        tp = min(8, mp)
        pp, dp = mp // tp, gpus // mp
        pub = search(model, mesh, prof, fixed={"tp": tp, "pp": pp, "dp": dp, "zero": 0,
                                               "checkpoint": True}).best
        start = time.perf_counter()
        found = search(model, mesh, prof)
        took = time.perf_counter() - start
        b, lo = found.best, found.best.layout
        err = (pub.tflops_per_device - published) / published
        errors.append(abs(err))
        print(f"| {name} | {tp} x {pp} x {dp}, {pub.layout.micro_batch}, {pub.layout.chunks} | "
              f"{published} | {pub.tflops_per_device:.0f} | {100 * err:+.0f}% | {lo.tp} x {lo.pp} "
              f"x {lo.dp}, mb {lo.micro_batch}, chunks {lo.chunks}, ZeRO {lo.zero}, ckpt "
              f"{'on' if lo.checkpoint else 'off'} | "
              f"{b.tflops_per_device:.0f} | {pub.step_time / b.step_time:.2f}x faster | "
              f"{took:.1f} s |")
    print(f"\nmean |error| {100 * sum(errors) / len(errors):.1f}%, "
          f"worst {100 * max(errors):.1f}% ({prof.name} profile)")


if __name__ == "__main__":
    main()
