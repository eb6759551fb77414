"""The cluster plan from every environment shape: SageMaker (homogeneous, heterogeneous, env variables),
SLURM (bracket ranges, per-node counts), host lists, one machine; malformed input names what and where."""

import json

import pytest

from codefu.errors import CodefuError
from codefu.launcher.detect import (
    DetectOptions,
    detect,
    expand_nodelist,
    from_hosts,
    from_sagemaker,
    from_slurm,
    guess_source,
    local_plan,
    parse_cpus_per_node,
    parse_hostfile,
    read_sagemaker_config,
)
from codefu.launcher.plan import NodeSpec, NodeView, instance_resources, missing_nodes, with_resources


def sm_config(current: str, groups: dict[str, tuple[str, list[str]]], **extra) -> dict:
    """resourceconfig.json as SageMaker writes it; groups: name -> (instance type, hosts)."""
    hosts = sorted(h for _, hs in groups.values() for h in hs)
    current_group = next(g for g, (_, hs) in groups.items() if current in hs)
    return {
        "current_host": current,
        "current_instance_type": groups[current_group][0],
        "current_group_name": current_group,
        "hosts": hosts,
        "instance_groups": [
            {"instance_group_name": g, "instance_type": t, "hosts": hs} for g, (t, hs) in groups.items()
        ],
        "network_interface_name": "eth0",
        **extra,
    }


# ---- SageMaker ----------------------------------------------------------------------------------


def test_sagemaker_homogeneous_worker():
    config = sm_config("algo-2", {"homogeneousCluster": ("ml.p4d.24xlarge", ["algo-2", "algo-1"])})
    plan = from_sagemaker(config, "rc.json", {})
    assert (plan.role, plan.head, plan.this_host, plan.num_nodes) == ("worker", "algo-1", "algo-2", 2)
    assert plan.nodes == (
        NodeSpec("algo-1", "homogeneousCluster", 96, 8),
        NodeSpec("algo-2", "homogeneousCluster", 96, 8),
    )
    assert plan.workers == ("algo-2",)
    assert plan.to_json()["role"] == "worker" and plan.to_json()["num_nodes"] == 2


def test_sagemaker_head_is_first_in_natural_order():
    config = sm_config("algo-1", {"g": ("ml.c5.xlarge", ["algo-10", "algo-2", "algo-1"])})
    plan = from_sagemaker(config, "rc.json", {})
    assert plan.role == "head"
    assert [n.host for n in plan.nodes] == ["algo-1", "algo-2", "algo-10"]


def test_sagemaker_this_hosts_counts_come_from_the_toolkit():
    config = sm_config("algo-1", {"g": ("ml.p4d.24xlarge", ["algo-1", "algo-2"])})
    plan = from_sagemaker(config, "rc.json", {"SM_NUM_GPUS": "4", "SM_NUM_CPUS": "48"})
    assert [(n.cpus, n.gpus) for n in plan.nodes] == [(48, 4), (48, 4)]  # the group shares its type


def test_sagemaker_heterogeneous_groups():
    config = sm_config(
        "algo-3",
        {"train": ("ml.p5.48xlarge", ["algo-1"]), "judge": ("ml.c5.18xlarge", ["algo-3", "algo-2"])},
    )
    plan = from_sagemaker(config, "rc.json", {})
    assert (plan.role, plan.head) == ("worker", "algo-1")
    assert plan.nodes == (
        NodeSpec("algo-1", "train", 192, 8),
        NodeSpec("algo-2", "judge", 72, 0),
        NodeSpec("algo-3", "judge", 72, 0),
    )
    assert [(g.name, g.hosts, g.instance_type) for g in plan.groups] == [
        ("train", ("algo-1",), "ml.p5.48xlarge"),
        ("judge", ("algo-2", "algo-3"), "ml.c5.18xlarge"),
    ]
    judge_head = from_sagemaker(config, "rc.json", {}, head_group="judge")
    assert (judge_head.head, judge_head.role, judge_head.nodes[0].host) == ("algo-2", "worker", "algo-2")


def test_sagemaker_config_without_instance_groups():
    plan = from_sagemaker({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"]}, "rc.json", {})
    assert [g.name for g in plan.groups] == ["homogeneousCluster"]
    assert all(n.cpus is None and n.gpus is None for n in plan.nodes)


def test_sagemaker_from_environment_variables(tmp_path):
    groups = {"gpu": {"instance_group_name": "gpu", "instance_type": "ml.g5.12xlarge", "hosts": ["algo-1"]},
              "cpu": {"instance_group_name": "cpu", "instance_type": "ml.m5.4xlarge", "hosts": ["algo-2"]}}  # fmt: skip
    env = {
        "SM_CURRENT_HOST": "algo-2",
        "SM_HOSTS": json.dumps(["algo-1", "algo-2"]),
        "SM_CURRENT_INSTANCE_GROUP": "cpu",
        "SM_INSTANCE_GROUPS_DICT": json.dumps(groups),
    }
    config, where = read_sagemaker_config(str(tmp_path / "absent.json"), env)
    assert where == "SM_* environment variables"
    plan = from_sagemaker(config, where, env)
    assert plan.nodes == (NodeSpec("algo-1", "gpu", 48, 4), NodeSpec("algo-2", "cpu", 16, 0))
    resource_config = json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]})
    config, where = read_sagemaker_config(
        str(tmp_path / "absent.json"), {"SM_RESOURCE_CONFIG": resource_config}
    )
    assert where == "SM_RESOURCE_CONFIG" and from_sagemaker(config, where, {}).role == "head"


def test_detect_reads_the_sagemaker_file(tmp_path):
    path = tmp_path / "resourceconfig.json"
    path.write_text(json.dumps(sm_config("algo-2", {"g": ("ml.c5.xlarge", ["algo-1", "algo-2"])})))
    plan = detect(DetectOptions(sagemaker_config=str(path)), {}, ["ip-10-0-0-2"])
    assert (plan.source, plan.role, plan.head) == ("sagemaker", "worker", "algo-1")


@pytest.mark.parametrize(
    "config,message",
    [
        ([1, 2], "rc.json: expected a JSON object"),
        ({"hosts": ["algo-1"]}, "rc.json: missing 'current_host'"),
        ({"current_host": "algo-1", "hosts": "algo-1"}, "'hosts' must be a non-empty list of host names"),
        ({"current_host": "algo-1", "hosts": []}, "'hosts' must be a non-empty list"),
        (
            {"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]},
            "this host 'algo-3' is not among the hosts",
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1", "algo-1"]},
            "'hosts' lists host 'algo-1' more than once",
        ),
        ({"current_host": "algo_1!", "hosts": ["algo_1!"]}, "host name 'algo_1!' cannot be a Ray node label"),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": {}},
            "'instance_groups' must be a non-empty list",
        ),
        (
            {"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"hosts": ["algo-1"]}]},
            "rc.json, instance_groups[0]: missing 'instance_group_name'",
        ),
        (
            {
                "current_host": "algo-1",
                "hosts": ["algo-1", "algo-2"],
                "instance_groups": [{"instance_group_name": "a", "hosts": ["algo-1"]}],
            },
            "'hosts' ['algo-1', 'algo-2'] and the hosts of 'instance_groups' ['algo-1'] differ",
        ),
        (
            {
                "current_host": "algo-1",
                "hosts": ["algo-1"],
                "instance_groups": [
                    {"instance_group_name": "a", "hosts": ["algo-1"]},
                    {"instance_group_name": "b", "hosts": ["algo-1"]},
                ],
            },
            "host 'algo-1' is in both groups 'a' and 'b'",
        ),
        (
            {
                "current_host": "algo-1",
                "current_group_name": "b",
                "hosts": ["algo-1"],
                "instance_groups": [{"instance_group_name": "a", "hosts": ["algo-1"]}],
            },
            "current_host 'algo-1' is in group 'a', but current_group_name is 'b'",
        ),
    ],
)
def test_malformed_sagemaker_config(config, message):
    with pytest.raises(CodefuError, match="^rc.json") as e:
        from_sagemaker(config, "rc.json", {})
    assert message in str(e.value)


def test_malformed_sagemaker_file_and_missing_config(tmp_path):
    path = tmp_path / "resourceconfig.json"
    path.write_text('{"current_host": "algo-1",\n "hosts": [algo-1]}')
    with pytest.raises(CodefuError, match=f"{path}: not valid JSON .* at line 2, column 12"):
        detect(DetectOptions(source="sagemaker", sagemaker_config=str(path)), {}, ["x"])
    with pytest.raises(CodefuError, match="not found, and neither SM_RESOURCE_CONFIG nor SM_CURRENT_HOST"):
        detect(DetectOptions(source="sagemaker", sagemaker_config=str(tmp_path / "nope.json")), {}, ["x"])
    with pytest.raises(CodefuError, match="SM_HOSTS: not valid JSON"):
        read_sagemaker_config(
            str(tmp_path / "nope.json"), {"SM_CURRENT_HOST": "algo-1", "SM_HOSTS": "[algo-1"}
        )
    with pytest.raises(CodefuError, match="--head-group 'gpu': no such instance group .*groups: a"):
        from_sagemaker({"current_host": "h", "hosts": ["h"], "current_group_name": "a"}, "rc", {}, "gpu")


# ---- SLURM --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,hosts",
    [
        ("node01", ["node01"]),
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("x[098-101]", ["x098", "x099", "x100", "x101"]),
        ("gpu[1-2],cpu7,login[3]", ["gpu1", "gpu2", "cpu7", "login3"]),
        ("r[1-2]-n[1-2].ib", ["r1-n1.ib", "r1-n2.ib", "r2-n1.ib", "r2-n2.ib"]),
    ],
)
def test_expand_nodelist(spec, hosts):
    assert expand_nodelist(spec) == hosts


@pytest.mark.parametrize(
    "spec,message",
    [
        ("gpu[1-3", "unbalanced brackets in 'gpu[1-3'"),
        ("gpu1-3]", "unbalanced brackets"),
        ("gpu[a-b]", "'a-b' in 'gpu[a-b]' is not a number or a range"),
        ("gpu[3-1]", "range '3-1' in 'gpu[3-1]' runs backwards"),
        ("gpu[[1]]", "nested brackets"),
        ("a,,b", "empty host name"),
    ],
)
def test_malformed_nodelist(spec, message):
    with pytest.raises(CodefuError, match="^SLURM_JOB_NODELIST: ") as e:
        expand_nodelist(spec)
    assert message in str(e.value)


def test_cpus_per_node():
    assert parse_cpus_per_node("72(x2),36") == [72, 72, 36]
    with pytest.raises(CodefuError, match=r"SLURM_JOB_CPUS_PER_NODE: '72\(x\)' is not a count"):
        parse_cpus_per_node("72(x)")


SLURM = {
    "SLURM_JOB_NODELIST": "trn[1-3]",
    "SLURM_NNODES": "3",
    "SLURM_NODEID": "1",
    "SLURM_JOB_CPUS_PER_NODE": "96(x2),48",
    "SLURM_GPUS_PER_NODE": "h100:8",
}


def test_slurm_plan():
    plan = from_slurm(SLURM)
    assert (plan.source, plan.role, plan.head, plan.this_host) == ("slurm", "worker", "trn1", "trn2")
    assert plan.nodes == (
        NodeSpec("trn1", "slurm", 96, 8),
        NodeSpec("trn2", "slurm", 96, 8),
        NodeSpec("trn3", "slurm", 48, 8),
    )
    assert from_slurm({**SLURM, "SLURM_NODEID": "0"}).role == "head"
    by_name = from_slurm({"SLURM_JOB_NODELIST": "a[1-2]", "SLURMD_NODENAME": "a2", "SLURM_CPUS_ON_NODE": "4"})
    assert (by_name.this_host, by_name.this_node.cpus, by_name.nodes[0].cpus) == ("a2", 4, None)


@pytest.mark.parametrize(
    "env,message",
    [
        ({"SLURM_NNODES": "4"}, "SLURM_NNODES=4, but SLURM_JOB_NODELIST='trn[1-3]' names 3 hosts"),
        ({"SLURM_NODEID": "3"}, "SLURM_NODEID=3, but SLURM_JOB_NODELIST names only 3 hosts"),
        ({"SLURM_NODEID": "x"}, "SLURM_NODEID='x': expected a whole number"),
        (
            {"SLURMD_NODENAME": "trn3"},
            "SLURM_NODEID=1 is 'trn2' in SLURM_JOB_NODELIST, but SLURMD_NODENAME is 'trn3'",
        ),
        ({"SLURM_JOB_CPUS_PER_NODE": "96(x2)"}, "counts 2 nodes, SLURM_JOB_NODELIST names 3"),
        ({"SLURM_GPUS_PER_NODE": "lots"}, "SLURM_GPUS_PER_NODE='lots': expected a GPU count"),
    ],
)
def test_malformed_slurm(env, message):
    with pytest.raises(CodefuError) as e:
        from_slurm({**SLURM, **env})
    assert message in str(e.value)


def test_slurm_without_a_node_id_says_how_to_start():
    with pytest.raises(CodefuError, match="srun --ntasks-per-node=1 codefu launch"):
        from_slurm({"SLURM_JOB_NODELIST": "a[1-2]"})
    with pytest.raises(CodefuError, match="SLURM_JOB_NODELIST is not set"):
        from_slurm({})


# ---- host lists and one machine -------------------------------------------------------------------


HOSTFILE = """
# the head first
gpu-a  gpus=8 cpus=96 group=train
gpu-b  gpus=8 cpus=96 group=train   # second trainer
cpu-a  cpus=64 group=judge
"""


def test_hostfile_plan():
    nodes = parse_hostfile(HOSTFILE, "hosts.txt")
    assert nodes == [
        NodeSpec("gpu-a", "train", 96, 8),
        NodeSpec("gpu-b", "train", 96, 8),
        NodeSpec("cpu-a", "judge", 64, None),
    ]
    plan = from_hosts(nodes, "hosts.txt", None, ["cpu-a", "cpu-a.example.com"])
    assert (plan.role, plan.head, plan.this_host) == ("worker", "gpu-a", "cpu-a")
    assert [(g.name, g.hosts) for g in plan.groups] == [("train", ("gpu-a", "gpu-b")), ("judge", ("cpu-a",))]
    assert from_hosts(nodes, "hosts.txt", 0, ["whatever"]).role == "head"


@pytest.mark.parametrize(
    "text,message",
    [
        ("a\nb slots=8\n", "hosts.txt, line 2: 'slots=8' is not one of cpus=N, gpus=N, group=NAME"),
        ("a gpus=eight\n", "hosts.txt, line 1: gpus='eight' is not a count"),
        ("# nothing\n\n", "hosts.txt: no hosts in the hostfile"),
    ],
)
def test_malformed_hostfile(text, message):
    with pytest.raises(CodefuError) as e:
        parse_hostfile(text, "hosts.txt")
    assert message in str(e.value)


def test_host_list_needs_to_know_which_host_this_is():
    nodes = [NodeSpec("a", "default"), NodeSpec("b", "default")]
    with pytest.raises(
        CodefuError, match=r"cannot tell which of \['a', 'b'\] this machine is .*'laptop'.*--rank"
    ):
        from_hosts(nodes, "--hosts", None, ["laptop"])
    with pytest.raises(CodefuError, match="--hosts: rank 2 is out of range for 2 hosts"):
        from_hosts(nodes, "--hosts", 2, ["a"])
    with pytest.raises(CodefuError, match="host 'a' is listed more than once"):
        from_hosts([*nodes, NodeSpec("a", "default")], "--hosts", 0, [])


def test_detect_host_list_from_environment(tmp_path):
    plan = detect(DetectOptions(), {"CODEFU_HOSTS": "h1, h2,h3", "CODEFU_NODE_RANK": "2"}, ["x"])
    assert (plan.source, plan.role, plan.head, plan.num_nodes) == ("hosts", "worker", "h1", 3)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("h1\nh2\n")
    plan = detect(DetectOptions(hostfile=str(hostfile)), {}, ["h2"])
    assert (plan.this_host, plan.role) == ("h2", "worker")
    with pytest.raises(CodefuError, match="cannot read the hostfile"):
        detect(DetectOptions(hostfile=str(tmp_path / "nope")), {}, ["h2"])


def test_guess_source_order():
    assert guess_source(DetectOptions(hosts="a,b"), {"SLURM_JOB_NODELIST": "x"}, True) == "hosts"
    assert guess_source(DetectOptions(), {"SLURM_JOB_NODELIST": "x"}, True) == "sagemaker"
    assert guess_source(DetectOptions(), {"SM_CURRENT_HOST": "algo-1"}, False) == "sagemaker"
    assert guess_source(DetectOptions(), {"SLURM_JOB_NODELIST": "x"}, False) == "slurm"
    assert guess_source(DetectOptions(), {}, False) == "local"


def test_local_plan():
    plan = local_plan("my-laptop")
    assert (plan.role, plan.head, plan.num_nodes, plan.workers) == ("head", "my-laptop", 1, ())
    assert local_plan("weird host!").this_host == "localhost"


# ---- readiness ----------------------------------------------------------------------------------


def node(host: str | None, cpus=1.0, gpus=0.0, alive=True) -> NodeView:
    labels = {"codefu-host": host} if host else {}
    return NodeView(f"id-{host}", "10.0.0.1", alive, labels, {"CPU": cpus, "GPU": gpus})


def test_missing_nodes():
    plan = from_hosts(
        [NodeSpec("a", "train", 4, 2), NodeSpec("b", "judge", 8, None), NodeSpec("c", "judge")], "h", 0, []
    )
    assert missing_nodes(plan, [node("a", 4, 2), node("b", 8), node("c")]) == []
    assert missing_nodes(plan, [node("a", 4, 1), node("b", 2), node("c", alive=False), node(None)]) == [
        "a joined with 1 GPUs, expected 2",
        "b joined with 2 CPUs, expected 8",
        "c (group judge) has not joined",
    ]


def test_resource_overrides_and_instance_types():
    plan = with_resources(from_hosts([NodeSpec("a", "g", 4, 2), NodeSpec("b", "g")], "h", 0, []), 1, None)
    assert [(n.cpus, n.gpus) for n in plan.nodes] == [(1, 2), (1, None)]
    assert instance_resources("ml.p4de.24xlarge") == (96, 8)
    assert instance_resources("ml.g6e.12xlarge") == (48, 4)
    assert instance_resources("ml.c6i.32xlarge") == (128, 0)
    assert instance_resources("ml.trn1.32xlarge") == (None, None)
    assert instance_resources("local") == (None, None)
