"""One rank of `python3 -m oneflow.distributed.plan --measure-profile` (measure.py starts two
through the launcher): times a GEMM, a copy, an elementwise add, a tiny op and all_reduces of two
sizes, and rank 0 writes the medians to the JSON file named by argv[1]."""

import json
import statistics
import sys
import time

from oneflow import _random, comm, env


def _median_seconds(fn, reps):
    fn()  # warm up
    times = []
    for _ in range(reps):
        comm.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(out):
    n, big, small_ar, big_ar = 512, 1 << 23, 1 << 8, 1 << 22  # elements (fp32)
    a, b = _random.randn(n, n), _random.randn(n, n)
    x, y = _random.randn(big), _random.randn(big)
    tiny = _random.randn(1)
    r_small, r_big = _random.randn(small_ar), _random.randn(big_ar)
    got = {
        "gemm_s": _median_seconds(lambda: a @ b, 7), "gemm_flops": 2.0 * n ** 3,
        "copy_s": _median_seconds(lambda: x.clone(), 7), "copy_bytes": 2.0 * 4 * big,
        "add_s": _median_seconds(lambda: x + y, 7), "add_elements": float(big),
        "tiny_s": _median_seconds(lambda: tiny + tiny, 51),
        "all_reduce_small_s": _median_seconds(lambda: comm.all_reduce(r_small), 21),
        "all_reduce_small_bytes": 4.0 * small_ar,
        "all_reduce_big_s": _median_seconds(lambda: comm.all_reduce(r_big), 7),
        "all_reduce_big_bytes": 4.0 * big_ar,
        "world_size": env.get_world_size(),
    }
    if env.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(got, f)


if __name__ == "__main__":
    main(sys.argv[1])
