"""Entrypoint of the multi-host tests: judge starter problems' reference solutions with RayJudgePool on
the cluster `codefu launch` brought up (RAY_ADDRESS), and write down where the work ran.

    python judge_job.py --out result.json [--problems 10] [--exit-code 7] [--pause-after K --pause-dir D]

--pause-after K stops consuming verdicts after the K-th, writes D/midway and waits for D/go (what the
test does in between: kill a host's Ray). Exit status: --exit-code if every verdict is ACCEPTED, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import ray

from codefu.data.starter import load_starter_problems
from codefu.judge import JudgeConfig
from codefu.judge.pool import PoolConfig, RayJudgePool
from codefu.types import Status


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--problems", type=int, default=10)
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--pause-after", type=int, default=0)
    p.add_argument("--pause-dir")
    p.add_argument("--group", help="also record where work asked for this instance group lands")
    args = p.parse_args()

    ray.init(address="auto", log_to_driver=False)
    ip_of = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
    placed = place_by_group(args.group) if args.group else {}
    items = [
        (problem, f"```{language}\n{source}\n```")
        for problem in load_starter_problems()[: args.problems]
        for language, source in sorted(problem.extra["solutions"].items())
    ]
    pool = RayJudgePool(
        JudgeConfig(max_tests=4), PoolConfig(in_flight_per_worker=1, submission_timeout_s=180)
    )
    judges_at_start = sorted(ip_of[s.node_id] for s in pool.slots)
    verdicts = {}
    for i, verdict in pool.judge_many(items):
        verdicts[i] = verdict
        if len(verdicts) == args.pause_after:
            pause(Path(args.pause_dir))
    # Every item is a distinct program, compiled once by the judge that ran it: compiles count the work.
    compiles = {ip_of[node]: stats["misses"] for node, stats in pool.compile_cache_stats().items()}
    pool.close()
    statuses = [verdicts[i].status.value for i in range(len(items))]
    result = {
        "cluster_nodes": sorted(ip_of.values()),
        "judges_at_start": judges_at_start,
        "compiles_by_node_at_end": compiles,
        "placed_by_group": placed,
        "items": len(items),
        "statuses": statuses,
        "messages": [verdicts[i].message[:300] for i in range(len(items)) if statuses[i] != "ACCEPTED"],
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"judge_job: {statuses.count('ACCEPTED')}/{len(items)} accepted; compiles by node {compiles}")
    return args.exit_code if all(s == Status.ACCEPTED.value for s in statuses) else 1


@ray.remote(num_cpus=0, scheduling_strategy="SPREAD")  # no CPU: the judges hold them all
def node_ip() -> str:
    return ray.util.get_node_ip_address()


def place_by_group(group: str) -> dict[str, list[str]]:
    """Where tasks land when they ask for `group` by label and by custom resource (codefu launch's)."""
    by_label = [node_ip.options(label_selector={"codefu-group": group}).remote() for _ in range(8)]
    by_resource = [node_ip.options(resources={f"codefu-group-{group}": 0.01}).remote() for _ in range(8)]
    return {"label": sorted(set(ray.get(by_label))), "resource": sorted(set(ray.get(by_resource)))}


def pause(folder: Path) -> None:
    (folder / "midway").write_text("")
    deadline = time.monotonic() + 300
    while not (folder / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("judge_job: nobody said go within 300 s")
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
