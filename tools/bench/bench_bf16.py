"""bfloat16 matmul on the CPU: our bfloat16 (oneDNN's bf16 kernels on AVX512-BF16 / AMX) against
our float32, and against PyTorch's bfloat16 for reference; one thread each.

    tools/python tools/bench/bench_bf16.py [--quick] [--json FILE]

Shapes: a square 1024^3 product and the GPT-2 small (768 wide, 1024 tokens) projections:
qkv (1024x768 @ 768x2304), MLP up (1024x768 @ 768x3072) and down (1024x3072 @ 3072x768).
The target (issue 15): bf16 >= 1.6x our float32 on a CPU with AVX512-BF16; on a CPU without
bfloat16 instructions our bfloat16 computes in float32 and the row says so.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import median, pin_single_thread, save_results  # noqa: E402

pin_single_thread()  # before oneflow / torch are imported

import time  # noqa: E402

import numpy as np  # noqa: E402
import oneflow as flow  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

SHAPES = {  # name: (m, k, n)
    "1024x1024x1024": (1024, 1024, 1024),
    "GPT-small qkv 1024x768x2304": (1024, 768, 2304),
    "GPT-small mlp up 1024x768x3072": (1024, 768, 3072),
    "GPT-small mlp down 1024x3072x768": (1024, 3072, 768),
}


def time_ms(fn, repeats):
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--json", help="save the result rows here (common.py's format)")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    rng = np.random.default_rng(0)
    native = flow._oneflow_internal.has_bf16_gemm()
    print(f"bf16 matmul, one thread; oneDNN bf16 kernels {'used' if native else 'NOT available: bf16 computes in float32'}")
    print(f"{'shape (m x k x n)':34s} {'ours f32':>9s} {'ours bf16':>10s} {'speedup':>8s}   {'torch bf16':>10s}  (ms)")
    rows = []
    for name, (m, k, n) in SHAPES.items():
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        fa, fb = flow.tensor(a), flow.tensor(b)
        ha, hb = fa.to(flow.bfloat16), fb.to(flow.bfloat16)
        ta, tb = torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16()
        f32 = time_ms(lambda: flow.matmul(fa, fb), repeats)
        bf16 = time_ms(lambda: flow.matmul(ha, hb), repeats)
        tbf16 = time_ms(lambda: torch.matmul(ta, tb), repeats)
        print(f"{name:34s} {f32:9.2f} {bf16:10.2f} {f32 / bf16:7.2f}x   {tbf16:10.2f}")
        rows.append({"metric": f"bf16 matmul {name}", "unit": "ms", "ours": bf16, "torch": f32,
                     "higher_is_better": False, "ours_label": "ours, bfloat16",
                     "baseline": "ours, float32",
                     "target": {"op": ">=", "value": 1.6, "on": "ratio"} if native else None})
        rows.append({"metric": f"bf16 matmul {name}", "unit": "ms", "ours": bf16, "torch": tbf16,
                     "higher_is_better": False, "ours_label": "ours, bfloat16",
                     "baseline": f"PyTorch {torch.__version__} (Debian), bfloat16", "target": None})
    save_results(args.json, rows)


if __name__ == "__main__":
    main()
