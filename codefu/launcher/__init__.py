"""Cluster bring-up: a pure plan from SageMaker/SLURM/host lists, then Ray head and workers.

See docs/launcher.md.

plan.py       ClusterPlan, NodeSpec, the readiness check (pure)
detect.py     SageMaker resourceconfig, SLURM variables, host lists -> ClusterPlan (pure parsers)
ray_node.py   the `ray start` command line; this host's Ray as a child process
gcs.py        node table and key-value store of a running cluster (Ray internals, kept here)
protocol.py   the outcome record the head publishes for the workers; exit codes
run.py        head and worker flows, signals
cli.py        `codefu launch`
"""

from codefu.launcher.config import LaunchConfig
from codefu.launcher.detect import DetectOptions, detect
from codefu.launcher.plan import ClusterPlan, InstanceGroup, NodeSpec, missing_nodes

__all__ = [
    "ClusterPlan",
    "DetectOptions",
    "InstanceGroup",
    "LaunchConfig",
    "NodeSpec",
    "detect",
    "missing_nodes",
]
