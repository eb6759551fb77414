"""Which cluster is this, and which host am I? The plan from SageMaker, SLURM, a host list or one machine.

Every host runs the same detection on the same inputs, so all agree on the head without talking:

- SageMaker: /opt/ml/input/config/resourceconfig.json (`current_host`, `hosts`, `current_group_name`,
  `instance_groups`), else the toolkit's `SM_RESOURCE_CONFIG` / `SM_CURRENT_HOST` + `SM_HOSTS`.
  The head is the first host in natural order (algo-1), or the first of `--head-group`.
- SLURM: `SLURM_JOB_NODELIST` (bracket ranges expanded), `SLURM_NODEID` (this host's index),
  `SLURM_NNODES`, `SLURM_JOB_CPUS_PER_NODE`, `SLURM_GPUS_PER_NODE`. The head is the first node.
- A host list: `--hostfile` (one host a line, optional `cpus= gpus= group=`), `--hosts` or
  `CODEFU_HOSTS` ("a,b,c"); this host by `--rank` / `CODEFU_NODE_RANK` or by host name. The head is
  the first host listed.
- Otherwise this machine alone.

The parsers are pure (text and environment in, plan out); only `detect` reads files.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codefu.errors import CodefuError
from codefu.launcher.plan import (
    ClusterPlan,
    InstanceGroup,
    NodeSpec,
    Source,
    build_plan,
    instance_resources,
    natural_key,
)

SAGEMAKER_CONFIG = "/opt/ml/input/config/resourceconfig.json"
SOURCES = ("auto", "sagemaker", "slurm", "hosts", "local")


@dataclass
class DetectOptions:
    source: str = "auto"
    """auto | sagemaker | slurm | hosts | local."""
    sagemaker_config: str = SAGEMAKER_CONFIG
    hostfile: str | None = None
    hosts: str | None = None
    """Comma-separated host names, the head first (else CODEFU_HOSTS)."""
    rank: int | None = None
    """This host's index in the host list (else CODEFU_NODE_RANK, else found by host name)."""
    head_group: str | None = None
    """Instance group the head is taken from (default: the group of the first host)."""


def detect(opts: DetectOptions, env: Mapping[str, str], hostnames: Sequence[str]) -> ClusterPlan:
    """`hostnames`: what this machine is called (host name, FQDN), the first being the preferred one."""
    source = opts.source
    if source == "auto":
        source = guess_source(opts, env, Path(opts.sagemaker_config).is_file())
    if source == "sagemaker":
        config, where = read_sagemaker_config(opts.sagemaker_config, env)
        return from_sagemaker(config, where, env, opts.head_group)
    if source == "slurm":
        return from_slurm(env, opts.head_group)
    if source == "hosts":
        nodes, where = read_host_list(opts, env)
        rank = opts.rank if opts.rank is not None else _int_var(env, "CODEFU_NODE_RANK")
        return from_hosts(nodes, where, rank, hostnames, opts.head_group)
    if source == "local":
        return local_plan(hostnames[0] if hostnames else "localhost")
    raise CodefuError(f"--env {source!r}: expected one of {', '.join(SOURCES)}")


def guess_source(opts: DetectOptions, env: Mapping[str, str], sagemaker_file: bool) -> Source:
    """An explicit host list wins, then SageMaker, then SLURM; else this machine alone."""
    if opts.hostfile or opts.hosts or env.get("CODEFU_HOSTS"):
        return "hosts"
    if sagemaker_file or "SM_RESOURCE_CONFIG" in env or "SM_CURRENT_HOST" in env:
        return "sagemaker"
    if "SLURM_JOB_NODELIST" in env or "SLURM_NODELIST" in env:
        return "slurm"
    return "local"


# ---- SageMaker --------------------------------------------------------------------------------------


def read_sagemaker_config(path: str, env: Mapping[str, str]) -> tuple[dict, str]:
    """The resource config and where it came from (for error messages)."""
    p = Path(path)
    if p.is_file():
        try:
            return _json(p.read_text(), str(p)), str(p)
        except OSError as e:
            raise CodefuError(f"{p}: cannot read ({e.strerror})") from None
    if "SM_RESOURCE_CONFIG" in env:
        return _json(env["SM_RESOURCE_CONFIG"], "SM_RESOURCE_CONFIG"), "SM_RESOURCE_CONFIG"
    if "SM_CURRENT_HOST" in env:
        config: dict[str, Any] = {
            "current_host": env["SM_CURRENT_HOST"],
            "hosts": _json(env.get("SM_HOSTS", "null"), "SM_HOSTS"),
        }
        if "SM_CURRENT_INSTANCE_GROUP" in env:
            config["current_group_name"] = env["SM_CURRENT_INSTANCE_GROUP"]
        if "SM_CURRENT_INSTANCE_TYPE" in env:
            config["current_instance_type"] = env["SM_CURRENT_INSTANCE_TYPE"]
        if "SM_INSTANCE_GROUPS_DICT" in env:
            groups = _json(env["SM_INSTANCE_GROUPS_DICT"], "SM_INSTANCE_GROUPS_DICT")
            if not isinstance(groups, dict):
                raise CodefuError("SM_INSTANCE_GROUPS_DICT: expected a JSON object of groups by name")
            config["instance_groups"] = list(groups.values())
        return config, "SM_* environment variables"
    raise CodefuError(
        f"{p}: not found, and neither SM_RESOURCE_CONFIG nor SM_CURRENT_HOST is set: "
        "is this a SageMaker training job? (--sagemaker-config names another file)"
    )


def from_sagemaker(
    config: Any, where: str, env: Mapping[str, str], head_group: str | None = None
) -> ClusterPlan:
    if not isinstance(config, dict):
        raise CodefuError(f"{where}: expected a JSON object with 'current_host' and 'hosts'")
    current = _field(config, "current_host", str, where)
    hosts = _str_list(config, "hosts", where)
    current_group = config.get("current_group_name", config.get("current_instance_group"))
    raw_groups = config.get("instance_groups")
    if raw_groups is None:  # older configs: one homogeneous group
        raw_groups = [
            {
                "instance_group_name": current_group or "homogeneousCluster",
                "instance_type": config.get("current_instance_type"),
                "hosts": hosts,
            }
        ]
    if not isinstance(raw_groups, list) or not raw_groups:
        raise CodefuError(f"{where}: 'instance_groups' must be a non-empty list")
    groups = [_sagemaker_group(g, f"{where}, instance_groups[{k}]") for k, g in enumerate(raw_groups)]
    group_of: dict[str, str] = {}
    for g in groups:
        for h in g.hosts:
            if h in group_of:
                raise CodefuError(f"{where}: host {h!r} is in both groups {group_of[h]!r} and {g.name!r}")
            group_of[h] = g.name
    if set(group_of) != set(hosts):
        raise CodefuError(
            f"{where}: 'hosts' {sorted(hosts, key=natural_key)} and the hosts of 'instance_groups' "
            f"{sorted(group_of, key=natural_key)} differ"
        )
    if current_group is not None and current in group_of and group_of[current] != current_group:
        raise CodefuError(
            f"{where}: current_host {current!r} is in group {group_of[current]!r}, "
            f"but current_group_name is {current_group!r}"
        )
    nodes = []
    for g in groups:
        cpus, gpus = instance_resources(g.instance_type)
        if current in g.hosts:  # measured on this host by the toolkit: better than the table
            cpus = _int_var(env, "SM_NUM_CPUS", cpus)
            gpus = _int_var(env, "SM_NUM_GPUS", gpus)
        nodes += [NodeSpec(h, g.name, cpus, gpus) for h in g.hosts]
    head = _pick_head(sorted(hosts, key=natural_key), group_of, head_group, where)
    return build_plan("sagemaker", current, head, nodes, groups, where)


def _sagemaker_group(g: Any, where: str) -> InstanceGroup:
    if not isinstance(g, dict):
        raise CodefuError(f"{where}: expected an object with 'instance_group_name' and 'hosts'")
    name = _field(g, "instance_group_name", str, where)
    instance_type = g.get("instance_type")
    if instance_type is not None and not isinstance(instance_type, str):
        raise CodefuError(f"{where}: 'instance_type' must be a string")
    hosts = _str_list(g, "hosts", where)
    return InstanceGroup(name, tuple(sorted(hosts, key=natural_key)), instance_type)


# ---- SLURM ------------------------------------------------------------------------------------------


def expand_nodelist(spec: str, where: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Slurm's compressed host list: "gpu[01-03,07],cpu-a[1-2]x" -> gpu01 gpu02 gpu03 gpu07 cpu-a1x cpu-a2x.
    Several bracket groups in one name expand to every combination; zero padding follows the range."""
    hosts: list[str] = []
    for item in _split_outside_brackets(spec, where):
        parts = [p for p in re.split(r"(\[[^\[\]]*\])", item) if p]
        choices = [_expand_range(p[1:-1], item, where) if p.startswith("[") else [p] for p in parts]
        if any("[" in p or "]" in p for p in parts if not p.startswith("[")):
            raise CodefuError(f"{where}: unbalanced brackets in {item!r}")
        hosts += ["".join(c) for c in itertools.product(*choices)]
    return hosts


def _split_outside_brackets(spec: str, where: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(spec + ","):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise CodefuError(f"{where}: nested brackets in {spec!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise CodefuError(f"{where}: unbalanced brackets in {spec!r}")
        elif ch == "," and depth == 0:
            item = spec[start:i].strip()
            if not item:
                raise CodefuError(f"{where}: empty host name in {spec!r}")
            items.append(item)
            start = i + 1
    if depth:
        raise CodefuError(f"{where}: unbalanced brackets in {spec!r}")
    return items


def _expand_range(body: str, item: str, where: str) -> list[str]:
    out = []
    for piece in body.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", piece)
        if not m:
            raise CodefuError(f"{where}: {piece!r} in {item!r} is not a number or a range like 01-04")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise CodefuError(f"{where}: range {piece!r} in {item!r} runs backwards")
        out += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1)]
    return out


def parse_cpus_per_node(spec: str, where: str = "SLURM_JOB_CPUS_PER_NODE") -> list[int]:
    """ "72(x2),36" -> [72, 72, 36]."""
    out = []
    for piece in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", piece)
        if not m:
            raise CodefuError(f"{where}: {piece!r} is not a count like 72 or 72(x2)")
        out += [int(m.group(1))] * int(m.group(2) or 1)
    return out


def from_slurm(env: Mapping[str, str], head_group: str | None = None) -> ClusterPlan:
    var = "SLURM_JOB_NODELIST" if "SLURM_JOB_NODELIST" in env else "SLURM_NODELIST"
    if var not in env:
        raise CodefuError("SLURM_JOB_NODELIST is not set: is this running inside a Slurm job?")
    hosts = expand_nodelist(env[var], var)
    count_var = "SLURM_JOB_NUM_NODES" if "SLURM_JOB_NUM_NODES" in env else "SLURM_NNODES"
    count = _int_var(env, count_var)
    if count is not None and count != len(hosts):
        raise CodefuError(f"{count_var}={count}, but {var}={env[var]!r} names {len(hosts)} hosts")
    this = _slurm_this_host(env, hosts, var)
    cpus: list[int | None] = [None] * len(hosts)
    if "SLURM_JOB_CPUS_PER_NODE" in env:
        cpus = list(parse_cpus_per_node(env["SLURM_JOB_CPUS_PER_NODE"]))
        if len(cpus) != len(hosts):
            raise CodefuError(
                f"SLURM_JOB_CPUS_PER_NODE={env['SLURM_JOB_CPUS_PER_NODE']!r} counts {len(cpus)} nodes, "
                f"{var} names {len(hosts)}"
            )
    per_node_gpus = _gpu_count(env.get("SLURM_GPUS_PER_NODE"), "SLURM_GPUS_PER_NODE")
    nodes = []
    for h, c in zip(hosts, cpus, strict=True):
        gpus = per_node_gpus
        if h == this:
            c = _int_var(env, "SLURM_CPUS_ON_NODE", c)
            gpus = _int_var(env, "SLURM_GPUS_ON_NODE", gpus)
        nodes.append(NodeSpec(h, "slurm", c, gpus))
    head = _pick_head(hosts, dict.fromkeys(hosts, "slurm"), head_group, var)
    return build_plan("slurm", this, head, nodes, [InstanceGroup("slurm", tuple(hosts))], var)


def _slurm_this_host(env: Mapping[str, str], hosts: list[str], var: str) -> str:
    name = env.get("SLURMD_NODENAME")
    node_id = _int_var(env, "SLURM_NODEID")
    if node_id is not None:
        if not 0 <= node_id < len(hosts):
            raise CodefuError(f"SLURM_NODEID={node_id}, but {var} names only {len(hosts)} hosts")
        if name and name != hosts[node_id]:
            raise CodefuError(
                f"SLURM_NODEID={node_id} is {hosts[node_id]!r} in {var}, but SLURMD_NODENAME is {name!r}"
            )
        return hosts[node_id]
    if name:
        if name not in hosts:
            raise CodefuError(f"SLURMD_NODENAME={name!r} is not among the job's hosts {hosts}")
        return name
    raise CodefuError(
        "SLURM_NODEID is not set, so this host's place in the job is unknown: start one launcher per "
        "node with `srun --ntasks-per-node=1 codefu launch ...`"
    )


def _gpu_count(spec: str | None, where: str) -> int | None:
    """ "8", "a100:8" or "gpu:a100:8" -> 8."""
    if not spec:
        return None
    m = re.fullmatch(r"(?:[\w.-]+:)*(\d+)", spec.strip())
    if not m:
        raise CodefuError(f"{where}={spec!r}: expected a GPU count such as 8 or a100:8")
    return int(m.group(1))


# ---- host lists ---------------------------------------------------------------------------------


def read_host_list(opts: DetectOptions, env: Mapping[str, str]) -> tuple[list[NodeSpec], str]:
    if opts.hostfile:
        try:
            text = Path(opts.hostfile).read_text()
        except OSError as e:
            raise CodefuError(f"{opts.hostfile}: cannot read the hostfile ({e.strerror})") from None
        return parse_hostfile(text, opts.hostfile), opts.hostfile
    spec, where = (opts.hosts, "--hosts") if opts.hosts else (env.get("CODEFU_HOSTS", ""), "CODEFU_HOSTS")
    names = [h for h in re.split(r"[,\s]+", spec) if h]
    if not names:
        raise CodefuError(f"{where}: no hosts (expected comma-separated host names, the head first)")
    return [NodeSpec(h, "default") for h in names], where


def parse_hostfile(text: str, where: str) -> list[NodeSpec]:
    """One host a line, the head first: `name [cpus=N] [gpus=N] [group=NAME]`; `#` starts a comment."""
    nodes = []
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        values: dict[str, str] = {}
        for f in fields[1:]:
            key, eq, value = f.partition("=")
            if not eq or key not in ("cpus", "gpus", "group") or not value:
                raise CodefuError(f"{where}, line {lineno}: {f!r} is not one of cpus=N, gpus=N, group=NAME")
            values[key] = value
        counts = {}
        for key in ("cpus", "gpus"):
            if key in values:
                if not values[key].isdigit():
                    raise CodefuError(f"{where}, line {lineno}: {key}={values[key]!r} is not a count")
                counts[key] = int(values[key])
        nodes.append(
            NodeSpec(fields[0], values.get("group", "default"), counts.get("cpus"), counts.get("gpus"))
        )
    if not nodes:
        raise CodefuError(f"{where}: no hosts in the hostfile")
    return nodes


def from_hosts(
    nodes: list[NodeSpec],
    where: str,
    rank: int | None,
    hostnames: Sequence[str],
    head_group: str | None = None,
) -> ClusterPlan:
    hosts = [n.host for n in nodes]
    if rank is not None:
        if not 0 <= rank < len(nodes):
            raise CodefuError(f"{where}: rank {rank} is out of range for {len(nodes)} hosts")
        this = hosts[rank]
    else:
        matches = [h for h in hosts if h in hostnames]
        if len(matches) != 1:
            raise CodefuError(
                f"{where}: cannot tell which of {hosts} this machine is (it is called "
                f"{', '.join(map(repr, hostnames))}); set --rank or CODEFU_NODE_RANK"
            )
        this = matches[0]
    groups: dict[str, list[str]] = {}
    for n in nodes:
        groups.setdefault(n.group, []).append(n.host)
    head = _pick_head(hosts, {n.host: n.group for n in nodes}, head_group, where)
    return build_plan(
        "hosts", this, head, nodes, [InstanceGroup(g, tuple(hs)) for g, hs in groups.items()], where
    )


def local_plan(hostname: str) -> ClusterPlan:
    host = (
        hostname if re.fullmatch(r"[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,61}[a-zA-Z0-9])?", hostname) else "localhost"
    )
    return build_plan(
        "local", host, host, [NodeSpec(host, "local")], [InstanceGroup("local", (host,))], "local"
    )


# ---- helpers ------------------------------------------------------------------------------------


def _pick_head(ordered: list[str], group_of: Mapping[str, str], head_group: str | None, where: str) -> str:
    if head_group is None:
        return ordered[0]
    candidates = [h for h in ordered if group_of[h] == head_group]
    if not candidates:
        raise CodefuError(
            f"--head-group {head_group!r}: no such instance group in {where} "
            f"(groups: {', '.join(sorted(set(group_of.values())))})"
        )
    return candidates[0]


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CodefuError(f"{where}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None


def _field(obj: dict, key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise CodefuError(f"{where}: missing {key!r}")
    if not isinstance(obj[key], kind) or obj[key] == "":
        raise CodefuError(f"{where}: {key!r} must be a non-empty {kind.__name__}, got {obj[key]!r}")
    return obj[key]


def _str_list(obj: dict, key: str, where: str) -> list[str]:
    value = obj.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(h, str) and h for h in value):
        raise CodefuError(f"{where}: {key!r} must be a non-empty list of host names, got {value!r}")
    if len(set(value)) < len(value):
        twice = next(h for h in value if value.count(h) > 1)
        raise CodefuError(f"{where}: {key!r} lists host {twice!r} more than once")
    return value


def _int_var(env: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    value = env.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit():
        raise CodefuError(f"{name}={value!r}: expected a whole number")
    return int(value)
