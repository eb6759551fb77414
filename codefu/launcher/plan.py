"""The cluster plan: which hosts make up the cluster, which one is the head, what each should bring.

Pure data and pure functions (no Ray, no network): `detect.py` builds a `ClusterPlan` from SageMaker,
SLURM or a host list; the bring-up (`run.py`) starts Ray from it and checks the nodes that registered
against it with `missing_nodes`.

Every node is started with two labels (its host and its instance group) and a resource per group, so
that placement and the readiness check can tell hosts and groups apart: `codefu.node_labels` names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from codefu.errors import CodefuError
from codefu.node_labels import HOST_LABEL

Source = Literal["sagemaker", "slurm", "hosts", "local"]

# Ray's rule for label values (ray._private.label_utils.LABEL_REGEX); host and group names become labels.
_LABEL_VALUE = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?")


@dataclass(frozen=True)
class NodeSpec:
    host: str
    group: str
    cpus: int | None = None
    """CPUs the node should register with at least (None: not checked)."""
    gpus: int | None = None
    """GPUs the node should register with at least (None: not checked)."""


@dataclass(frozen=True)
class InstanceGroup:
    name: str
    hosts: tuple[str, ...]
    instance_type: str | None = None


@dataclass(frozen=True)
class ClusterPlan:
    source: Source
    this_host: str
    head: str
    nodes: tuple[NodeSpec, ...]
    """Every host of the cluster, the head first."""
    groups: tuple[InstanceGroup, ...] = field(default=())

    @property
    def role(self) -> Literal["head", "worker"]:
        return "head" if self.this_host == self.head else "worker"

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def this_node(self) -> NodeSpec:
        return self.node(self.this_host)

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(n.host for n in self.nodes if n.host != self.head)

    def node(self, host: str) -> NodeSpec:
        return next(n for n in self.nodes if n.host == host)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "role": self.role,
            "this_host": self.this_host,
            "head": self.head,
            "num_nodes": self.num_nodes,
            "nodes": [{"host": n.host, "group": n.group, "cpus": n.cpus, "gpus": n.gpus} for n in self.nodes],
            "groups": [
                {"name": g.name, "instance_type": g.instance_type, "hosts": list(g.hosts)}
                for g in self.groups
            ],
        }


def build_plan(
    source: Source, this_host: str, head: str, nodes: list[NodeSpec], groups: list[InstanceGroup], where: str
) -> ClusterPlan:
    """Validate and order (head first, then natural host order); `where` names the input in errors."""
    hosts = [n.host for n in nodes]
    duplicates = sorted({h for h in hosts if hosts.count(h) > 1})
    if duplicates:
        raise CodefuError(f"{where}: host {duplicates[0]!r} is listed more than once")
    for name, what in [*((h, "host name") for h in hosts), *((n.group, "group name") for n in nodes)]:
        if not _LABEL_VALUE.fullmatch(name):
            raise CodefuError(
                f"{where}: {what} {name!r} cannot be a Ray node label "
                "(letters, digits, '-', '_' and '.', starting and ending with a letter or digit, "
                "at most 63 characters)"
            )
    for host, what in ((this_host, "this host"), (head, "the head")):
        if host not in hosts:
            raise CodefuError(f"{where}: {what} {host!r} is not among the hosts {hosts}")
    ordered = sorted(nodes, key=lambda n: (n.host != head, natural_key(n.host)))
    return ClusterPlan(source, this_host, head, tuple(ordered), tuple(groups))


def with_resources(plan: ClusterPlan, cpus: int | None, gpus: int | None) -> ClusterPlan:
    """Every node is started with these counts (`--num-cpus/--num-gpus`), so expect exactly them."""
    nodes = tuple(
        replace(n, cpus=n.cpus if cpus is None else cpus, gpus=n.gpus if gpus is None else gpus)
        for n in plan.nodes
    )
    return replace(plan, nodes=nodes)


def natural_key(host: str) -> tuple:
    """algo-2 before algo-10: every host sorts the same way, so all agree on who is first."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", host))


@dataclass(frozen=True)
class NodeView:
    """A node as the GCS reports it (built by `gcs.py`, kept free of Ray types for testing)."""

    node_id: str
    ip: str
    alive: bool
    labels: dict[str, str]
    resources: dict[str, float]

    @property
    def host(self) -> str | None:
        return self.labels.get(HOST_LABEL)


def missing_nodes(plan: ClusterPlan, nodes: list[NodeView]) -> list[str]:
    """What keeps the cluster from matching the plan, one phrase per host; empty when it does."""
    alive = {n.host: n for n in nodes if n.alive and n.host}
    gaps = []
    for spec in plan.nodes:
        node = alive.get(spec.host)
        if node is None:
            gaps.append(f"{spec.host} (group {spec.group}) has not joined")
            continue
        for name, want in (("CPU", spec.cpus), ("GPU", spec.gpus)):
            have = node.resources.get(name, 0.0)
            if want is not None and have + 1e-9 < want:
                gaps.append(f"{spec.host} joined with {have:g} {name}s, expected {want}")
    return gaps


# What a SageMaker instance type brings, for groups other than this host's (whose counts come from
# SM_NUM_CPUS / SM_NUM_GPUS). Unknown types are simply not checked.
_SIZE_CPUS = {
    "large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "9xlarge": 36, "12xlarge": 48,
    "16xlarge": 64, "18xlarge": 72, "24xlarge": 96, "32xlarge": 128, "48xlarge": 192,
}  # fmt: skip
_CPU_FAMILIES = {"c5", "c5n", "c6i", "c7i", "m5", "m6i", "m7i", "r5", "r6i", "r7i"}
_G_GPUS = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4,
           "24xlarge": 4, "48xlarge": 8}  # fmt: skip
_P_TYPES = {"p4d.24xlarge": (96, 8), "p4de.24xlarge": (96, 8), "p5.48xlarge": (192, 8),
            "p5e.48xlarge": (192, 8), "p5en.48xlarge": (192, 8)}  # fmt: skip


def instance_resources(instance_type: str | None) -> tuple[int | None, int | None]:
    """(CPUs, GPUs) of a SageMaker instance type such as ml.p4d.24xlarge; (None, None) if unknown."""
    if not instance_type or not instance_type.startswith("ml."):
        return None, None
    family, _, size = instance_type[3:].partition(".")
    if f"{family}.{size}" in _P_TYPES:
        return _P_TYPES[f"{family}.{size}"]
    if family in {"g5", "g6", "g6e"} and size in _G_GPUS:
        return _SIZE_CPUS[size], _G_GPUS[size]
    if family in _CPU_FAMILIES and size in _SIZE_CPUS:
        return _SIZE_CPUS[size], 0
    return None, None
