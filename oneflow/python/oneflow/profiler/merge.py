"""Merges the per-rank traces in a folder (tensorboard_trace_handler's *.pt.trace.json[.gz],
or export_chrome_trace files) into one Chrome trace: one process row per rank, every rank's
times on rank 0's clock (each trace carries its offset, measured through the control plane).

    python3 -m oneflow.profiler.merge DIR [-o DIR/merged.pt.trace.json]

It also prints, per collective call, how long the first rank to arrive waited for the last.
"""
import argparse
import glob
import os
import sys

from oneflow.profiler.chrome_trace import merge_traces, read_trace, write_trace

MERGED_NAME = "merged.pt.trace.json"


def trace_files(folder):
    files = []
    for pattern in ("*.json", "*.json.gz"):
        files += glob.glob(os.path.join(folder, pattern))
    return sorted(f for f in files if not os.path.basename(f).startswith("merged."))


def late_arrivals(merged, top=5):
    """The collectives where ranks arrived furthest apart: (name, call index, late rank, wait us).
    The n-th call of a collective name on each rank's main row is one call."""
    calls = {}
    for e in merged["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "collective":
            calls.setdefault((e["pid"], e["name"]), []).append(e)
    by_call = {}
    for (pid, name), evs in calls.items():
        evs.sort(key=lambda e: e["ts"])
        for i, e in enumerate(evs):
            by_call.setdefault((name, i), []).append(e)
    out = []
    for (name, i), evs in by_call.items():
        if len(evs) < 2:
            continue
        first = min(evs, key=lambda e: e["ts"])
        last = max(evs, key=lambda e: e["ts"])
        out.append((name, i, last["pid"], last["ts"] - first["ts"]))
    out.sort(key=lambda r: -r[3])
    return out[:top]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m oneflow.profiler.merge", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", help="folder with the ranks' trace files")
    p.add_argument("-o", "--output", help=f"merged trace (default DIR/{MERGED_NAME})")
    args = p.parse_args(argv)
    if not os.path.isdir(args.dir):
        print(f"merge: {args.dir} is not a folder", file=sys.stderr)
        return 2
    files = trace_files(args.dir)
    if not files:
        print(f"merge: no trace files (*.json, *.json.gz) in {args.dir}", file=sys.stderr)
        return 2
    try:
        merged = merge_traces([read_trace(f) for f in files])
    except (ValueError, KeyError) as e:
        print(f"merge: {e}", file=sys.stderr)
        return 2
    out = args.output or os.path.join(args.dir, MERGED_NAME)
    write_trace(merged, out)
    ranks = merged["distributedInfo"]["ranks"]
    print(f"merge: {len(files)} traces of ranks {ranks} -> {out}")
    for name, i, rank, wait in late_arrivals(merged):
        print(f"  {name} #{i}: rank {rank} arrived last, {wait / 1e3:.3f} ms after the first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
