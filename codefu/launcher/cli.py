"""`codefu launch`: bring a Ray cluster up across machines, run a command in it, take it down.

Run the same command on every host (SageMaker starts it on each instance; on SLURM use
`srun --ntasks-per-node=1`). Each host finds out from its environment whether it is the head; the head
waits for every node, runs the command after `--` with RAY_ADDRESS set, and every host exits with the
command's status:

    codefu launch -- codefu train --config configs/codefu-7b.yaml
    codefu launch --dry-run              # print this host's plan as JSON, start nothing
    codefu launch                        # no command: keep the cluster up until SIGTERM (submit jobs)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys

from codefu.errors import check_flags
from codefu.launcher.config import LaunchConfig
from codefu.launcher.detect import SAGEMAKER_CONFIG, SOURCES, DetectOptions, detect
from codefu.launcher.plan import with_resources
from codefu.launcher.ray_node import ray_start_argv


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch",
        help="start Ray across the hosts of a SageMaker/SLURM job or a host list and run a command in it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = p.add_argument_group("which cluster")
    where.add_argument("--env", default="auto", choices=SOURCES, help="where the host list comes from")
    where.add_argument("--sagemaker-config", default=SAGEMAKER_CONFIG, help="SageMaker's resourceconfig.json")
    where.add_argument("--hostfile", help="one host a line, the head first: NAME [cpus=N] [gpus=N] [group=G]")
    where.add_argument("--hosts", help="comma-separated host names, the head first (else CODEFU_HOSTS)")
    where.add_argument("--rank", type=int, help="this host's index in the host list (else CODEFU_NODE_RANK)")
    where.add_argument("--head-group", help="take the head from this instance group (default: first host's)")

    d = LaunchConfig()
    ray = p.add_argument_group("ray start")
    ray.add_argument("--port", type=int, default=d.port, help="the head's GCS port")
    ray.add_argument("--dashboard-host", default=d.dashboard_host)
    ray.add_argument("--dashboard-port", type=int, default=d.dashboard_port, help="dashboard and job API")
    ray.add_argument("--metrics-export-port", type=int, default=d.metrics_export_port)
    ray.add_argument("--prometheus-host", help="sets RAY_PROMETHEUS_HOST for the dashboard")
    ray.add_argument("--grafana-host", help="sets RAY_GRAFANA_HOST for the dashboard")
    ray.add_argument("--num-cpus", type=int, help="CPUs each node offers (default: detected)")
    ray.add_argument("--num-gpus", type=int, help="GPUs each node offers (default: detected)")
    ray.add_argument("--object-store-memory", type=int, help="bytes of object store on each node")
    ray.add_argument("--temp-dir", help="Ray's session folder on this host (keep it short)")
    ray.add_argument("--node-ip", help="the address this node registers with (default: found)")
    ray.add_argument("--auth", default=d.auth, choices=["auto", "token", "disabled"], help="Ray token auth")
    ray.add_argument(
        "--ray-arg", action="append", default=[], metavar="ARG", help="extra `ray start` argument (repeat)"
    )

    t = p.add_argument_group("timeouts (seconds)")
    t.add_argument(
        "--join-timeout", type=float, default=d.join_timeout_s, help="worker: reach and join the head"
    )
    t.add_argument(
        "--nodes-timeout", type=float, default=d.nodes_timeout_s, help="head: every node registered"
    )
    t.add_argument("--head-lost-timeout", type=float, default=d.head_lost_timeout_s)
    t.add_argument("--release-timeout", type=float, default=d.release_timeout_s)
    t.add_argument("--stop-grace", type=float, default=d.stop_grace_s, help="SIGTERM to SIGKILL")

    p.add_argument("--dry-run", action="store_true", help="print this host's plan as JSON and exit")
    p.add_argument("entrypoint", nargs=argparse.REMAINDER, help="after --: what the head runs in the cluster")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    a, port = args, "in 1..65535"
    check_flags(
        args,
        [
            ("port", 1 <= a.port <= 65535, port),
            ("dashboard_port", 1 <= a.dashboard_port <= 65535, port),
            ("metrics_export_port", 1 <= a.metrics_export_port <= 65535, port),
            ("num_cpus", a.num_cpus is None or a.num_cpus >= 0, ">= 0"),
            ("num_gpus", a.num_gpus is None or a.num_gpus >= 0, ">= 0"),
            ("object_store_memory", a.object_store_memory is None or a.object_store_memory >= 1, ">= 1"),
            ("join_timeout", a.join_timeout > 0, "> 0"),
            ("nodes_timeout", a.nodes_timeout > 0, "> 0"),
            ("head_lost_timeout", a.head_lost_timeout > 0, "> 0"),
            ("release_timeout", a.release_timeout >= 0, ">= 0"),
            ("stop_grace", a.stop_grace >= 0, ">= 0"),
        ],
    )
    cfg = LaunchConfig(
        port=args.port,
        dashboard_host=args.dashboard_host,
        dashboard_port=args.dashboard_port,
        metrics_export_port=args.metrics_export_port,
        prometheus_host=args.prometheus_host,
        grafana_host=args.grafana_host,
        num_cpus=args.num_cpus,
        num_gpus=args.num_gpus,
        object_store_memory=args.object_store_memory,
        temp_dir=args.temp_dir,
        node_ip=args.node_ip,
        auth=args.auth,
        ray_args=args.ray_arg,
        join_timeout_s=args.join_timeout,
        nodes_timeout_s=args.nodes_timeout,
        head_lost_timeout_s=args.head_lost_timeout,
        release_timeout_s=args.release_timeout,
        stop_grace_s=args.stop_grace,
    )
    opts = DetectOptions(
        source=args.env,
        sagemaker_config=args.sagemaker_config,
        hostfile=args.hostfile,
        hosts=args.hosts,
        rank=args.rank,
        head_group=args.head_group,
    )
    hostnames = list(dict.fromkeys([socket.gethostname(), socket.getfqdn()]))
    plan = with_resources(detect(opts, os.environ, hostnames), cfg.num_cpus, cfg.num_gpus)
    command = args.entrypoint[1:] if args.entrypoint[:1] == ["--"] else args.entrypoint
    if args.dry_run:
        head_address = f"{plan.head}:{cfg.port}"
        doc = {
            **plan.to_json(),
            "head_address": head_address,
            "dashboard": f"http://{plan.head}:{cfg.dashboard_port}",
            "ray_start": ray_start_argv(plan, cfg, cfg.node_ip, head_address),
            "entrypoint": command if plan.role == "head" else None,
        }
        print(json.dumps(doc, indent=2))
        return 0
    logging.basicConfig(
        format=f"%(asctime)s codefu launch [{plan.this_host} {plan.role}] %(levelname)s: %(message)s",
        level=logging.WARNING,
        stream=sys.stderr,
    )
    logging.getLogger("codefu.launcher").setLevel(logging.INFO)
    logging.getLogger("codefu.launcher").info("plan: %s", json.dumps(plan.to_json()))

    from codefu.launcher.run import launch

    return launch(plan, cfg, command)
