"""Which replica a workspace escalates to, and how busy the cluster says it is.

Replica affinity (rendezvous hashing): with several base URLs and no balancer in front,
each workspace key ranks the URLs by a hash of (key, URL) and uses them in that order.
A workspace always lands on the same replica (its prefix cache stays warm there), the
workspaces spread evenly over all replicas, a failure moves only that workspace to the
next URL in its own order, and adding or removing one URL moves only the workspaces
that ranked it first.

The cluster's load: vLLM's Prometheus text at `/metrics` (no key needed) has
`vllm:num_requests_waiting`, `vllm:num_requests_running` and `vllm:kv_cache_usage_perc`
(`vllm:gpu_cache_usage_perc` before the V1 engine), one series per engine and model;
a gateway that re-exports them sums the same names over replicas.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import attrs

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


def rendezvous(key: str, urls: Sequence[str]) -> list[str]:
    """`urls` in `key`'s own order: highest hash of (key, url) first."""

    def weight(url: str) -> bytes:
        return hashlib.sha256(f"{key}\0{url}".encode()).digest()

    return sorted(urls, key=weight, reverse=True)


def server_root(url: str) -> str | None:
    """The server root of a base URL that is a vLLM server's own `/v1` (`http://h:8000/v1`
    -> `http://h:8000`); None for a URL with any other path (a gateway's route, whose
    root may be somebody else's server)."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    if not sep or not host or not slash or path.rstrip("/") != "v1":
        return None
    return f"{scheme}://{host}"


@attrs.frozen
class ClusterLoad:
    """One reading of a replica's (or a gateway's) `/metrics`."""

    url: str  # where it was read
    at: float  # when (monotonic seconds)
    waiting: float  # requests queued for a slot
    running: float  # requests in the running batch
    kv_usage: float | None  # share of the KV cache in use, 0..1 (None: not exported)


class MetricsError(ValueError):
    """The text is not vLLM's Prometheus metrics (no queue gauges in it)."""


def parse_metrics(text: str, url: str, at: float) -> ClusterLoad:
    """The queue, batch and KV-cache gauges of a Prometheus text exposition, summed over
    their labels (engines, models); the KV usage is the largest series (the fullest
    engine). Comments, other metrics and malformed lines are skipped."""
    sums: dict[str, float] = {}
    kv: float | None = None
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        # `name{labels} value [timestamp]`; a label value may hold spaces.
        head, brace, rest = line.rpartition("}")
        fields = (rest if brace else line).split()
        name = (head if brace else fields[0] if fields else "").split("{", 1)[0].strip()
        try:
            v = float(fields[0 if brace else 1])
        except (ValueError, IndexError):
            continue
        if not math.isfinite(v) or v < 0:
            continue
        if name in KV_USAGE:
            kv = v if kv is None else max(kv, v)
        elif name in (WAITING, RUNNING):
            sums[name] = sums.get(name, 0.0) + v
    if WAITING not in sums or RUNNING not in sums:
        raise MetricsError(f"{url} has no {WAITING} and {RUNNING} gauges")
    return ClusterLoad(url, at, sums[WAITING], sums[RUNNING], None if kv is None else min(1.0, kv))


__all__ = ["ClusterLoad", "MetricsError", "parse_metrics", "rendezvous", "server_root"]
