"""Hardware profiles: what one device and its links can do, as small JSON files.

    p = load_profile("a100_80gb")          # a shipped profile (profiles/*.json), or a path
    p.gemm_rate("bf16")                    # FLOP/s a large GEMM reaches: peak * gemm_efficiency
    p.intra                                # collectives.Link within a node, efficiency applied

Fields (every one required; rates in FLOP/s and bytes/s, times in seconds):
  name, memory_bytes, memory_reserved_bytes (kept back for the runtime: context, workspaces),
  memory_bandwidth, peak_flops {dtype: FLOP/s}, vector_flops (the non-matrix units),
  gemm_efficiency and memory_efficiency (the achievable fractions of the peaks),
  kernel_overhead_s (per kernel launch), intra_node and inter_node {name, bandwidth (one
  device's, one direction), latency, efficiency}, sources (where the figures come from).
`python3 -m oneflow.distributed.plan --measure-profile out.json` writes one for this machine.
"""

import json
import os
from dataclasses import dataclass

from oneflow.distributed.plan.collectives import Link

PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
_FIELDS = ("name", "memory_bytes", "memory_reserved_bytes", "memory_bandwidth", "peak_flops",
           "vector_flops", "gemm_efficiency", "memory_efficiency", "kernel_overhead_s",
           "intra_node", "inter_node", "sources")
_LINK_FIELDS = ("name", "bandwidth", "latency", "efficiency")


def shipped():
    """The names of the profiles shipped with the package."""
    return sorted(f[:-5] for f in os.listdir(PROFILES) if f.endswith(".json"))


@dataclass(frozen=True)
class Profile:
    name: str
    memory_bytes: float
    memory_reserved_bytes: float
    memory_bandwidth: float
    peak_flops: tuple  # ((dtype, FLOP/s), ...), hashable
    vector_flops: float
    gemm_efficiency: float
    memory_efficiency: float
    kernel_overhead_s: float
    intra: Link
    inter: Link
    intra_name: str = ""
    inter_name: str = ""

    def peak(self, dtype):
        rates = dict(self.peak_flops)
        if dtype not in rates:
            raise ValueError(f"plan: profile {self.name!r} has no peak for dtype {dtype!r}; "
                             f"it has {', '.join(rates)}")
        return rates[dtype]

    def gemm_rate(self, dtype):
        return self.peak(dtype) * self.gemm_efficiency

    @property
    def memory_rate(self):
        return self.memory_bandwidth * self.memory_efficiency

    @property
    def memory_limit(self):
        return self.memory_bytes - self.memory_reserved_bytes


def _link(d, where, field):
    missing = [f for f in _LINK_FIELDS if f not in d]
    if missing:
        raise ValueError(f"plan: profile {where}: {field} lacks {', '.join(missing)}")
    return Link(float(d["bandwidth"]) * float(d["efficiency"]), float(d["latency"])), d["name"]


def _numbers(d, where, prefix=""):
    """Refuses a field that should be a positive number and is not, in one line."""
    for k, v in d.items():
        if isinstance(v, dict):
            _numbers(v, where, f"{prefix}{k}.")
        elif k not in ("name", "sources") and (isinstance(v, bool) or not isinstance(v, (int, float))
                                                or v < 0):
            raise ValueError(f"plan: profile {where}: {prefix}{k} must be a number >= 0, got {v!r}")


def profile_from_dict(d, where="<dict>"):
    if not isinstance(d, dict):
        raise ValueError(f"plan: profile {where} must be a JSON object, got {type(d).__name__}")
    missing = [f for f in _FIELDS if f not in d]
    if missing:
        raise ValueError(f"plan: profile {where} lacks {', '.join(missing)}")
    _numbers({k: v for k, v in d.items() if k in _FIELDS}, where)
    intra, intra_name = _link(d["intra_node"], where, "intra_node")
    inter, inter_name = _link(d["inter_node"], where, "inter_node")
    return Profile(d["name"], float(d["memory_bytes"]), float(d["memory_reserved_bytes"]),
                   float(d["memory_bandwidth"]),
                   tuple((k, float(v)) for k, v in d["peak_flops"].items()),
                   float(d["vector_flops"]), float(d["gemm_efficiency"]),
                   float(d["memory_efficiency"]), float(d["kernel_overhead_s"]), intra, inter,
                   intra_name, inter_name)


def load_profile(name_or_path):
    """A shipped profile by name ("a100_80gb", "h100_sxm", ...) or a JSON file by path."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    path = name_or_path
    if not os.path.exists(path):
        path = os.path.join(PROFILES, f"{name_or_path}.json")
    if not os.path.exists(path):
        raise ValueError(f"plan: no profile {name_or_path!r}: give a JSON file or one of "
                         f"{', '.join(shipped())}")
    with open(path) as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"plan: profile {path} is not JSON: {e}") from None
    return profile_from_dict(d, path)
