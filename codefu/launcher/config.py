"""Knobs of the bring-up: ports, resources, timeouts. The cluster's shape comes from `detect.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class LaunchConfig:
    port: int = 6379
    """The head's GCS port (workers join at head:port)."""
    dashboard_host: str = "0.0.0.0"
    dashboard_port: int = 8265
    """Dashboard and job API (`ray job submit --address http://head:8265`)."""
    metrics_export_port: int = 8081  # not 8080: `codefu serve`'s port on the same head
    """Prometheus scrape port, the same on every node so one scrape config covers the cluster."""
    prometheus_host: str | None = None
    """Sets RAY_PROMETHEUS_HOST for the dashboard (default: whatever the environment says)."""
    grafana_host: str | None = None
    """Sets RAY_GRAFANA_HOST for the dashboard (default: whatever the environment says)."""
    num_cpus: int | None = None
    """CPUs every node offers to Ray (default: the plan's count for the host, else Ray detects)."""
    num_gpus: int | None = None
    object_store_memory: int | None = None
    """Bytes of the object store on every node (default: Ray's share of memory)."""
    temp_dir: str | None = None
    """Ray's session folder (default /tmp/ray). Keep it short: Ray puts unix sockets under it."""
    node_ip: str | None = None
    """The address this node registers with (default: the host name's address on the head, the
    address that routes to the head on workers)."""
    auth: Literal["auto", "token", "disabled"] = "auto"
    """Ray token authentication. auto: on if RAY_AUTH_MODE=token or RAY_AUTH_TOKEN(_PATH) is set on
    every host, else off. Every host must decide the same way."""
    ray_args: list[str] = field(default_factory=list)
    """More `ray start` arguments, passed as they are (e.g. --min-worker-port=20000)."""
    start_timeout_s: float = 180.0
    """How long this host's own `ray start` may take to register its node."""
    join_timeout_s: float = 600.0
    """Worker: how long to keep trying to reach and join the head before giving up."""
    nodes_timeout_s: float = 600.0
    """Head: how long to wait for every node of the plan to register."""
    head_lost_timeout_s: float = 60.0
    """Worker: the head may be unreachable this long before the worker gives up on it."""
    release_timeout_s: float = 30.0
    """Head: how long to wait for workers to read the result before stopping Ray."""
    stop_grace_s: float = 30.0
    """Time between forwarding SIGTERM to the entrypoint and killing it."""
    poll_s: float = 1.0
