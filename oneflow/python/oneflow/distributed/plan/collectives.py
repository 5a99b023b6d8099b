"""What a collective costs: bytes per rank from the boxing table, time from the link it runs on.

    Comm("all_reduce", bytes=8 << 20, group="tp", phase="fwd")        # a P->B over tp
    seconds(Comm(...), n=8, link=Link(bandwidth=300e9, latency=5e-6))

The bytes one rank moves are those of the repository's boxing table (sbp/boxing_steps.cc), for a
tensor of `bytes` (its logical size) over n ranks, ring algorithms:
    P->B     all_reduce      2 * bytes * (n-1)/n      in 2(n-1) ring steps
    S(i)->B  all_gather      bytes * (n-1)/n          in n-1 steps
    P->S(i)  reduce_scatter  bytes * (n-1)/n          in n-1 steps
    S(i)->S(j) all_to_all    bytes * (n-1)/n / n      in n-1 steps
    send_recv (a route between placements, a pipeline stage's output): bytes, one step
B->S(i), B->P and S(i)->P are local (no bytes). Time = steps * latency + bytes_per_rank /
bandwidth, the ring's slowest link setting the bandwidth (see Link and group_link).
"""

from dataclasses import dataclass

# (bytes per rank as a fraction of the tensor's bytes, ring steps), as functions of n.
_TABLE = {
    "all_reduce": (lambda n: 2.0 * (n - 1) / n, lambda n: 2 * (n - 1)),
    "all_gather": (lambda n: (n - 1) / n, lambda n: n - 1),
    "reduce_scatter": (lambda n: (n - 1) / n, lambda n: n - 1),
    "all_to_all": (lambda n: (n - 1) / n / n, lambda n: n - 1),
    "send_recv": (lambda n: 1.0, lambda n: 1),
}
KINDS = tuple(_TABLE)

# The boxing that each (from, to) pair of one hierarchy dimension needs, in the repository's SBP
# words (sbp/sbp.h's ToString: S(0), B, P); the local ones move nothing.
BOXING = {("P", "B"): "all_reduce", ("S", "B"): "all_gather", ("P", "S"): "reduce_scatter",
          ("S", "S"): "all_to_all", ("B", "S"): None, ("B", "P"): None, ("S", "P"): None}

# The other way round, for printed plans: "tp P->B all_reduce 1.1 TiB".
SBP_CHANGE = {kind: f"{a}->{b}" for (a, b), kind in BOXING.items() if kind}
SBP_CHANGE["send_recv"] = "route"


def boxing_kind(src, dst):
    """The collective turning sbp `src` into `dst` ("S(0)", "B", "P"); None when local.
    boxing_kind("P", "B") == "all_reduce"."""
    if src == dst:
        return None
    key = (src[0], dst[0])
    if key not in BOXING:
        raise ValueError(f"plan: no boxing from {src} to {dst}: SBP is S(k), B or P")
    return BOXING[key]


@dataclass(frozen=True)
class Comm:
    kind: str  # a key of _TABLE
    bytes: float  # the logical tensor's bytes
    group: str  # the mesh axis it runs over: "tp", "pp" or "dp"
    phase: str = "fwd"  # "fwd", "bwd" or "step" (once per step, after the pipeline)

    def __post_init__(self):
        if self.kind not in _TABLE:
            raise ValueError(f"plan: unknown collective {self.kind!r}; known: {', '.join(KINDS)}")


@dataclass(frozen=True)
class Link:
    bandwidth: float  # bytes/s one rank sends (and receives) at once
    latency: float  # seconds per ring step


def bytes_per_rank(kind, nbytes, n):
    if n <= 1:
        return 0.0
    return _TABLE[kind][0](n) * nbytes


def seconds(comm, n, link):
    """Time of `comm` over a group of n ranks whose slowest ring link is `link`."""
    if n <= 1:
        return 0.0
    return _TABLE[comm.kind][1](n) * link.latency + bytes_per_rank(comm.kind, comm.bytes, n) / link.bandwidth


def group_link(size, stride, devices_per_node, intra, inter):
    """The link a ring over `size` ranks spaced `stride` apart runs at, on nodes of
    devices_per_node. Within a node: the intra-node link. Across nodes: each node's members of
    the group send through their own network ports at once (one per device, as on DGX
    machines), so the ring gets inter.bandwidth times the members per node, capped by the
    intra-node link, at the inter-node latency."""
    if size <= 1 or size * stride <= devices_per_node:
        return intra
    per_node = max(1, min(size, devices_per_node // stride)) if stride < devices_per_node else 1
    return Link(min(intra.bandwidth, inter.bandwidth * per_node), max(intra.latency, inter.latency))
