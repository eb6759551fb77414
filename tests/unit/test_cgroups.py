"""Parsing of the cgroup files the sandbox reads (v1 here; v2 formats from the kernel's documentation)."""

import pytest

from codefu.judge.cgroups import _own_cgroup_paths, parse_oom_kills, parse_v2_cpu_stat


def test_own_cgroup_paths_v1_and_v2():
    text = "12:pids:/a\n4:memory:/process_api/x\n2:cpu,cpuacct:/b\n0::/user.slice/u.scope\n"
    paths = _own_cgroup_paths(text)
    assert paths["pids"] == "/a" and paths["memory"] == "/process_api/x"
    assert paths["cpu"] == paths["cpuacct"] == "/b"
    assert paths[""] == "/user.slice/u.scope"


def test_v2_cpu_stat():
    assert parse_v2_cpu_stat("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n") == 1.5
    with pytest.raises(ValueError):
        parse_v2_cpu_stat("user_usec 3\n")


def test_oom_kill_counters():
    assert parse_oom_kills("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n") == 1
    assert parse_oom_kills("low 0\n") == 0
    assert parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3
