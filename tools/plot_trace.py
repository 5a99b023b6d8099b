"""Draws a (merged) Chrome trace from oneflow.profiler as a PNG timeline: a band per rank, the
ranges of each thread stacked by nesting depth, coloured by kind (op, backward, boxing,
collective, graph, user). It made docs/profiler_timeline.png:

    tools/python tools/plot_trace.py TRACE.json OUT.png [--window 'ProfilerStep#1'] [--width 1600]

--window draws only the span of the ranges of that name (on any rank); default: everything.
"""
import argparse
import json
import sys

from PIL import Image, ImageDraw, ImageFont

COLORS = {
    "op": (78, 121, 167),
    "backward": (242, 142, 43),
    "boxing": (176, 122, 161),
    "collective": (225, 87, 89),
    "graph": (89, 161, 79),
    "user": (186, 176, 172),
    "kernel": (118, 183, 178),
}
ROW_H, BAND_GAP, LEFT, TOP = 16, 18, 110, 58


def depths(spans):
    """Nesting depth of each span of one thread (by time containment)."""
    out, stack = [], []
    for e in sorted(spans, key=lambda e: (e["ts"], -e["dur"])):
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        out.append((e, len(stack)))
        stack.append(e)
    return out


def font(size):
    try:
        return ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", size)
    except OSError:
        return ImageFont.load_default()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--window", help="draw only the span of the ranges with this name")
    p.add_argument("--width", type=int, default=1600)
    args = p.parse_args(argv)
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    if args.window:
        marks = [e for e in spans if e["name"] == args.window]
        if not marks:
            sys.exit(f"plot_trace: no range named {args.window!r} in {args.trace}")
        lo = min(e["ts"] for e in marks)
        hi = max(e["ts"] + e["dur"] for e in marks)
        spans = [e for e in spans if e["ts"] < hi and e["ts"] + e["dur"] > lo]
    else:
        lo = min(e["ts"] for e in spans)
        hi = max(e["ts"] + e["dur"] for e in spans)
    scale = (args.width - LEFT - 10) / max(hi - lo, 1e-9)
    bands = []  # (label, [(span, depth)], rows)
    for pid in sorted({e["pid"] for e in spans}):
        tids = sorted({e["tid"] for e in spans if e["pid"] == pid}, key=str)
        for i, tid in enumerate(tids):
            placed = depths([e for e in spans if e["pid"] == pid and e["tid"] == tid])
            label = f"rank {pid}" + ("" if i == 0 else f" t{i}")
            bands.append((label, placed, 1 + max(d for _, d in placed)))
    height = TOP + sum(rows * ROW_H + BAND_GAP for _, _, rows in bands) + 10
    img = Image.new("RGB", (args.width, height), "white")
    d = ImageDraw.Draw(img)
    small, big = font(10), font(13)
    d.text((LEFT, 6), f"oneflow.profiler: {len(bands)} rows, {(hi - lo) / 1e3:.1f} ms", fill="black",
           font=big)
    x = LEFT
    for kind, color in COLORS.items():
        d.rectangle([x, 28, x + 12, 40], fill=color)
        d.text((x + 16, 28), kind, fill="black", font=small)
        x += 90
    for k in range(11):  # time axis, ms
        tx = LEFT + k * (args.width - LEFT - 10) / 10
        d.line([tx, TOP - 8, tx, height - 10], fill=(235, 235, 235))
        d.text((tx + 2, TOP - 14), f"{(hi - lo) * k / 10 / 1e3:.1f}", fill="gray", font=small)
    y = TOP
    for label, placed, rows in bands:
        d.text((6, y + 2), label, fill="black", font=big)
        for e, depth in placed:
            x0 = LEFT + max(e["ts"] - lo, 0) * scale
            x1 = LEFT + min(e["ts"] + e["dur"] - lo, hi - lo) * scale
            top = y + depth * ROW_H
            d.rectangle([x0, top, max(x1, x0 + 1), top + ROW_H - 2],
                        fill=COLORS.get(e.get("cat"), (200, 200, 200)))
            if x1 - x0 > 40:
                d.text((x0 + 2, top + 2), e["name"][: int((x1 - x0) / 6)], fill="white", font=small)
        y += rows * ROW_H + BAND_GAP
    img.save(args.out, optimize=True)
    print(f"plot_trace: {args.out} ({args.width}x{height})")


if __name__ == "__main__":
    main()
