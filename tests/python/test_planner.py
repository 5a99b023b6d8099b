"""The planner (oneflow.distributed.plan): its FLOP and activation counts against the closed
forms of Narayanan et al. 2021 and Korthikanti et al. 2022, its collectives against the boxing
table, ZeRO's memory, the search's choices and limits, the command line. No processes."""

import io
import json
import os
import time

import pytest

from oneflow.distributed.plan import (Layout, Mesh, PlanError, evaluate, gpt, load_profile, mlp,
                                      plan, search, shipped)
from oneflow.distributed.plan import collectives as C
from oneflow.distributed.plan.cli import main
from oneflow.distributed.plan.hardware import PROFILES

A100 = load_profile("a100_80gb")
GiB = float(1 << 30)


@pytest.mark.parametrize("l,h,a,V,s,B", [(24, 2304, 24, 51200, 2048, 512),
                                         (128, 25600, 160, 51200, 2048, 3072),
                                         (2, 64, 4, 72, 32, 8)])
def test_gpt_flops_match_narayanan(l, h, a, V, s, B):
    m = gpt(l, h, a, V, s, B)
    closed = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    assert m.model_flops() == pytest.approx(closed, rel=1e-12)
    # With every block recomputed: the paper's F = 96 B s l h^2 (1 + s/6h + V/16lh).
    recomputed = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    assert m.model_flops() + m.recompute_flops() == pytest.approx(recomputed, rel=1e-12)


@pytest.mark.parametrize("t", [1, 2, 8])
def test_gpt_block_activations_match_korthikanti(t):
    b, s, h, a = 2, 2048, 4096, 32
    blk = gpt(1, h, a, 51200, s, 8).block.part(b, t)
    saved = sum(o.saved for o in blk.ops)
    closed = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))  # bytes, fp16, no sequence parallel
    ln_stats = 2 * 8 * b * s  # the two layer norms' mean and rstd per row
    assert saved == pytest.approx(closed + ln_stats, rel=1e-12)


@pytest.mark.parametrize("t", [2, 8])
def test_sequence_parallel_and_flash_attention_activations(t):
    b, s, h, a = 2, 2048, 4096, 32
    sp = gpt(1, h, a, 51200, s, 8, sequence_parallel=True).block.part(b, t)
    closed = s * b * h * (34 / t + 5 * a * s / (h * t))  # Korthikanti et al., sequence parallel
    assert sum(o.saved for o in sp.ops) == pytest.approx(closed + 2 * 8 * b * s / t, rel=1e-12)
    # Its collectives move what tensor parallelism's all-reduces move (all_gather +
    # reduce_scatter = all_reduce), plus the gathers of the kept inputs again in backward.
    plain = gpt(1, h, a, 51200, s, 8).block.part(b, t)
    moved = [sum(C.bytes_per_rank(c.kind, c.bytes, t) for c in p.comms) for p in (sp, plain)]
    assert moved[0] == pytest.approx(moved[1] * 10 / 8)  # 10 gathers or scatters, 4 all-reduces
    fl = gpt(1, h, a, 51200, s, 8, flash_attention=True, dropout=False).block.part(b, 1)
    # No scores kept: 34 sbh less the three dropout-mask bytes, plus a float per row and head.
    assert sum(o.saved for o in fl.ops) == pytest.approx(s * b * h * 32 + 4 * b * a * s + 2 * 8 * b * s)
    assert gpt(2, h, a, 51200, s, 8, flash_attention=True).model_flops() == gpt(
        2, h, a, 51200, s, 8).model_flops()


def test_overlap_hides_communication_behind_compute():
    m = gpt(8, 4096, 32, 51200, 2048, 256)
    for lo in (Layout(tp=8, dp=16, micro_batch=2), Layout(tp=8, pp=2, dp=8, micro_batch=1)):
        plain, hidden = (evaluate(m, Mesh(16, 8), A100, lo, overlap=o) for o in (False, True))
        assert plain.times["tp comm"] > 0 and hidden.times["tp comm"] == 0
        assert hidden.times["dp sync"] < plain.times["dp sync"]
        assert hidden.step_time < plain.step_time and hidden.comm_bytes == plain.comm_bytes


def test_collectives_follow_the_boxing_table():
    # sbp/boxing_steps.h: StepFor(P, B).cost(4096, 2) == 4096.
    assert C.bytes_per_rank("all_reduce", 4096, 2) == 4096
    assert C.bytes_per_rank("all_gather", 4096, 4) == 3072
    assert C.bytes_per_rank("reduce_scatter", 4096, 4) == 3072
    assert C.bytes_per_rank("all_to_all", 4096, 4) == 768
    assert [C.boxing_kind(*k) for k in (("P", "B"), ("S(0)", "B"), ("P", "S(1)"), ("S(0)", "S(1)"),
                                        ("B", "S(0)"), ("B", "B"))] == [
        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", None, None]
    link = C.Link(bandwidth=100e9, latency=1e-5)
    assert C.seconds(C.Comm("all_reduce", 8e9, "dp"), 4, link) == pytest.approx(6e-5 + 12e9 / 100e9)
    # A ring across nodes: the members in a node share the node's ports, the intra link caps it.
    inter = C.Link(25e9, 2e-5)
    assert C.group_link(8, 1, 8, link, inter) is link
    assert C.group_link(6, 8, 8, link, inter).bandwidth == 25e9  # one member per node
    assert C.group_link(32, 1, 8, link, inter).bandwidth == 100e9  # 8 per node: 200e9, capped
    with pytest.raises(ValueError, match="unknown collective 'broadcast'"):
        C.Comm("broadcast", 1, "dp")


def test_zero_stages_shard_state_gradients_weights():
    m = gpt(4, 1024, 16, 32000, 1024, 64)
    mesh = Mesh(1, 8)
    parts = [evaluate(m, mesh, A100, Layout(dp=8, zero=z)).memory_parts for z in range(4)]
    p0 = parts[0]
    n = m.parameters()
    assert p0["parameters"] == pytest.approx(2 * n) and p0["gradients"] == pytest.approx(2 * n)
    assert p0["optimizer"] == pytest.approx(12 * n)  # mixed precision: fp32 master, m, v
    assert parts[1]["optimizer"] == pytest.approx(p0["optimizer"] / 8)
    assert parts[1]["gradients"] == p0["gradients"]
    assert parts[2]["gradients"] == pytest.approx(p0["gradients"] / 8)
    assert parts[2]["parameters"] == p0["parameters"]
    assert parts[3]["parameters"] == pytest.approx(p0["parameters"] / 8)
    # ZeRO 1 and 2 move what an all-reduce moves; ZeRO 3 gathers the weights every micro-batch.
    e0, e1 = (evaluate(m, mesh, A100, Layout(dp=8, zero=z)) for z in (0, 1))
    assert sum(e1.comm_bytes.values()) == pytest.approx(sum(e0.comm_bytes.values()))


def test_pipeline_bubble_and_schedules():
    m = mlp(layers=8, width=1024, batch=64)
    e = evaluate(m, Mesh(1, 4), A100, Layout(pp=4, micro_batch=8))
    assert e.micro_batches == 8
    pipeline = sum(e.times[k] for k in ("compute", "tp comm", "pp send", "pipeline bubble"))
    assert e.times["pipeline bubble"] / pipeline == pytest.approx(3 / 11)  # (p-1)/(m+p-1)
    assert sum(e.times.values()) == pytest.approx(e.step_time)
    v = evaluate(m, Mesh(1, 4), A100, Layout(pp=4, micro_batch=8, chunks=2))  # interleaved
    pipeline = sum(v.times[k] for k in ("compute", "tp comm", "pp send", "pipeline bubble"))
    assert v.times["pipeline bubble"] / pipeline == pytest.approx(3 / (2 * 8 + 3))
    assert v.memory_parts["activations"] == pytest.approx(
        e.memory_parts["activations"] * (1 + 3 / 8))
    with pytest.raises(PlanError, match=r"^plan: 3 chunks per stage \(the interleaved 1F1B "
                                        r"schedule\) need 1f1b, pp > 1, the 8 blocks divisible"):
        evaluate(m, Mesh(1, 4), A100, Layout(pp=4, micro_batch=8, chunks=3))
    g = evaluate(m, Mesh(1, 4), A100, Layout(pp=4, micro_batch=8, schedule="gpipe"))
    assert g.memory_parts["activations"] == pytest.approx(2 * e.memory_parts["activations"])  # m/p
    assert g.step_time == pytest.approx(e.step_time)


def test_checkpointing_trades_memory_for_time():
    m = gpt(8, 1024, 16, 32000, 1024, 64)
    off, on = (evaluate(m, Mesh(1, 8), A100, Layout(dp=8, micro_batch=8, checkpoint=c))
               for c in (False, True))
    assert on.memory_parts["activations"] < off.memory_parts["activations"] / 4
    assert on.step_time > off.step_time
    # The recomputed forward of every block: 64 samples x 8 layers x (24 s h^2 + 4 s^2 h).
    s, h = 1024, 1024
    assert on.hardware_flops - off.hardware_flops == pytest.approx(64 * 8 * (24 * s * h * h + 4 * s * s * h))


def test_search_never_returns_a_plan_over_the_limit():
    m = gpt(16, 4096, 32, 51200, 2048, 64)
    for limit_gib in (12, 20, 40, 76):
        r = search(m, Mesh(1, 8), A100, memory_limit=limit_gib * GiB)
        assert r.best.fits and r.best.memory <= limit_gib * GiB
        assert r.runner_up is None or r.runner_up.memory <= limit_gib * GiB
        assert r.over_limit > 0
    with pytest.raises(PlanError, match=r"plan: no layout of GPT fits 1.0 GiB per device on 8 "
                                        r"devices; the smallest needs [0-9.]+ GiB \(tp 8 x pp"):
        search(m, Mesh(1, 8), A100, memory_limit=1 * GiB)


def test_small_weights_large_batch_mlp_gets_data_parallelism():
    r = search(mlp(layers=4, width=256, batch=8192), Mesh(1, 8), A100)
    assert (r.best.layout.tp, r.best.layout.pp, r.best.layout.dp) == (1, 1, 8)
    assert r.why.startswith(f"{100 * (r.runner_up.step_time / r.best.step_time - 1):.1f}% slower")


def test_weights_over_the_limit_under_dp_get_split():
    m = mlp(layers=8, width=8192, batch=64)  # 4.3B fp32 parameters: 69 GB with Adam per copy
    limit = 40 * GiB
    dp = evaluate(m, Mesh(1, 8), A100, Layout(dp=8), memory_limit=limit)
    assert not dp.fits
    r = search(m, Mesh(1, 8), A100, memory_limit=limit)
    lo = r.best.layout
    assert r.best.fits and (lo.tp > 1 or lo.zero >= 1 or lo.pp > 1)
    weights = sum(r.best.memory_parts[k] for k in ("parameters", "gradients", "optimizer"))
    assert weights < limit


def test_a_gpt_that_data_parallelism_cannot_hold_gets_a_plan_that_fits():
    m = gpt(32, 4096, 32, 51200, 2048, 64)  # 6.6B parameters: 106 GB of state per DP copy
    over = [evaluate(m, Mesh(1, 8), A100, Layout(dp=8, micro_batch=b, checkpoint=True))
            for b in (1, 2, 4, 8)]
    assert not any(e.fits for e in over)
    r = search(m, Mesh(1, 8), A100)
    assert r.best.fits and r.best.layout != over[0].layout


def test_layout_mistakes_are_one_line_errors():
    m = gpt(4, 1024, 16, 32000, 1024, 64)
    cases = [(Layout(tp=2, dp=2), "plan: tp 2 x pp 1 x dp 2 = 4 devices, but the mesh (1 nodes x 8) has 8"),
             (Layout(tp=8, dp=1, pp=1, micro_batch=1, zero=0, checkpoint=False), None),
             (Layout(tp=1, pp=8), "plan: pp 8 is more stages than the 4 blocks"),
             (Layout(dp=8, micro_batch=3), "plan: batch 64 does not split into dp 8 x micro-batch 3"),
             (Layout(dp=8, zero=4), "plan: ZeRO stage must be 0, 1, 2 or 3, got 4")]
    for lo, msg in cases:
        if msg is None:
            evaluate(m, Mesh(1, 8), A100, lo)
            continue
        with pytest.raises(PlanError) as e:
            evaluate(m, Mesh(1, 8), A100, lo)
        assert str(e.value) == msg
    with pytest.raises(PlanError, match=r"^plan: GPT: tp 3 does not divide the heads \(16\)$"):
        evaluate(m, Mesh(1, 6), A100, Layout(tp=3, dp=2))


def test_profiles_ship_and_load(tmp_path):
    assert {"a100_80gb", "h100_sxm"} <= set(shipped())
    h = load_profile("h100_sxm")
    assert h.peak("bf16") > A100.peak("bf16") and h.memory_limit > 0
    with pytest.raises(ValueError, match=r"plan: profile 'A100 80GB SXM4 \(DGX A100\)' has no peak for dtype 'fp4'; it has fp64"):
        A100.peak("fp4")
    with pytest.raises(ValueError, match="plan: no profile 'v100': give a JSON file or one of"):
        load_profile("v100")
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"name": "x"}))
    with pytest.raises(ValueError, match=f"plan: profile {bad} lacks memory_bytes,"):
        load_profile(str(bad))
    with open(os.path.join(PROFILES, "a100_80gb.json")) as f:
        d = json.load(f)
    d["intra_node"]["bandwidth"] = "fast"
    bad.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=f"^plan: profile {bad}: intra_node.bandwidth must be a "
                                         f"number >= 0, got 'fast'$"):
        load_profile(str(bad))


def test_cli_prints_a_plan_and_an_evaluation():
    args = ["--n_layer", "24", "--n_embd", "2304", "--n_head", "24", "--vocab", "51200",
            "--block_size", "2048", "--batch_size", "512", "--nodes", "4"]
    out = io.StringIO()
    assert main(args, out=out) == 0
    text = out.getvalue()
    assert "best:" in text and "runner-up:" in text and "why it lost:" in text
    assert "layout: tp " in text and "TFLOP/s per device" in text
    out = io.StringIO()
    assert main(args + ["--tp", "2", "--pp", "2", "--micro_batch", "2", "--checkpoint"], out=out) == 0
    text = out.getvalue()
    assert "layout: tp 2 x pp 2 x dp 8, micro-batch 2, ZeRO 0, checkpointing on" in text
    assert "memory per device:" in text and "pp route send_recv" in text and "tp P->B all_reduce" in text
    assert plan(24, 2304, 24, 51200, 2048, 512, nodes=4, tp=2, pp=2, micro_batch=2,
                checkpoint=True).lines()[1] in text


def test_cli_refuses_an_incomplete_model_and_a_bad_layout(capsys):
    assert main(["--layers", "2", "--hidden", "64"]) == 2
    assert capsys.readouterr().err == "plan: the model needs --heads, --vocab, --seq, --batch\n"
    small = ["--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "128", "--seq", "32",
             "--batch", "8", "--devices_per_node", "2"]
    for extra, err in ((["--tp", "0"], "plan: layout needs a positive integer tp, got 0"),
                       (["--zero", "7"], "plan: ZeRO stage must be 0, 1, 2 or 3, got 7"),
                       (["--nodes", "0"], "plan: the mesh needs a positive integer nodes, got 0"),
                       (["--dtype", "fp8"], "plan: unknown dtype 'fp8'; known: fp32, tf32, bf16, fp16"),
                       (["--tp", "3"], "plan: tp 3 x pp 1 does not divide the mesh's 2 devices")):
        assert main(small + extra) == 2
        assert capsys.readouterr().err == err + "\n"
    out = io.StringIO()
    assert main(small + ["--dtype", "fp32"], out=out) == 0
    assert "KiB" in out.getvalue() and "GFLOP/s per device" in out.getvalue()


def test_the_1t_row_plans_in_under_a_minute():
    m = gpt(128, 25600, 160, 51200, 2048, 3072, dtype="fp16")
    start = time.perf_counter()
    r = search(m, Mesh(384, 8), A100)
    took = time.perf_counter() - start
    assert took < 60
    published = evaluate(m, Mesh(384, 8), A100, Layout(8, 64, 6, 1, 0, True))
    assert r.best.step_time <= published.step_time and r.best.fits


def test_measured_timings_become_a_profile(tmp_path):
    from oneflow.distributed.plan.hardware import profile_from_dict
    from oneflow.distributed.plan.measure import profile_from_timings
    t = {"gemm_s": 0.01, "gemm_flops": 2e9, "copy_s": 0.02, "copy_bytes": 2e8, "add_s": 0.01,
         "add_elements": 1e7, "tiny_s": 5e-6, "all_reduce_small_s": 4e-5,
         "all_reduce_small_bytes": 1024.0, "all_reduce_big_s": 0.01 + 4e-5,
         "all_reduce_big_bytes": 16e6, "world_size": 2}
    d = profile_from_timings(t, memory_bytes=16e9)
    p = profile_from_dict(d)
    assert p.peak("fp32") == pytest.approx(2e11) and p.memory_rate == pytest.approx(1e10)
    assert p.intra.latency == pytest.approx(2e-5)  # 2 ring steps in the small all_reduce
    assert p.intra.bandwidth == pytest.approx(16e6 / 0.01)  # 2 ranks: each moves the tensor once
    assert p.memory_limit == pytest.approx(7.2e9) and p.kernel_overhead_s == 5e-6


def test_transient_gradients_and_pipeline_sends_per_rank():
    """nn.Graph's gradients are intermediates: the peak holds activations or gradients, not
    both. A pipeline's end stages send one way (the first its output, the last its input's
    gradient), the middle ones both: bytes per rank, as the communicator counts them."""
    m = mlp(layers=8, width=1024, batch=64)
    kept = evaluate(m, Mesh(1, 2), A100, Layout(dp=2, micro_batch=32))
    graph = evaluate(m, Mesh(1, 2), A100, Layout(dp=2, micro_batch=32), transient_grads=True)
    parts = kept.memory_parts
    assert kept.memory == pytest.approx(sum(parts.values()))
    assert graph.memory == pytest.approx(parts["parameters"] + parts["optimizer"]
                                         + max(parts["activations"], parts["gradients"]))
    two = evaluate(m, Mesh(1, 2), A100, Layout(pp=2, micro_batch=8))
    four = evaluate(m, Mesh(1, 4), A100, Layout(pp=4, micro_batch=8))
    activation = 8 * 1024 * m.precision.itemsize  # one micro-batch's (8, 1024) output
    assert two.comm_bytes[("pp", "send_recv")] == pytest.approx(8 * activation)
    assert four.comm_bytes[("pp", "send_recv")] == pytest.approx(2 * 8 * activation)


def test_a_model_traced_on_meta_tensors_prices_as_the_analytic_gpt():
    """examples/gpt.py's GPT built on the meta device (no weights), traced through its forward,
    gives the analytic gpt()'s model FLOPs and parameters exactly, and its layouts' bytes."""
    import os
    import sys

    import oneflow as flow
    from oneflow.distributed.plan.trace import trace

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    import gpt as gpt_py

    with flow.device("meta"):
        model = gpt_py.GPT(96, 64, 2, 4, 256, tied=False)
    model.to("meta")  # its constant buffers were made on the CPU
    spec = trace(model, flow.zeros(8, 64, dtype=flow.int64, device="meta"), batch=8)
    ref = gpt(layers=2, hidden=256, heads=4, vocab=96, seq=64, batch=8, dtype="fp32",
              dropout=False, tied=False)
    assert spec.layers == 2 and spec.model_flops() == ref.model_flops()
    assert spec.parameters() == ref.parameters() == sum(p.numel() for p in model.parameters())
    for lo, n in ((Layout(dp=2, micro_batch=4), 2), (Layout(pp=2, micro_batch=2), 2)):
        a, b = evaluate(spec, Mesh(1, n), A100, lo), evaluate(ref, Mesh(1, n), A100, lo)
        assert a.comm_bytes == b.comm_bytes
        # gpt.py scales and masks the scores in ops of their own, which the analytic model fuses
        # into its softmax: priced by bytes, they add some time
        assert b.step_time < a.step_time < 1.15 * b.step_time
        assert a.memory == pytest.approx(b.memory, rel=0.1)
    assert spec.check_tp(2) == ("tp 2: a traced model has no tensor-parallel signatures yet "
                                "(tp 1 only)")
    with pytest.raises(ValueError, match="plan: trace needs the model on the meta device"):
        trace(gpt_py.GPT(96, 64, 2, 4, 32), flow.zeros(2, 64, dtype=flow.int64, device="meta"))
