"""The judge pool when a node's replacement actor cannot start (a node that just died still looks alive to
Ray for seconds, and an actor placed there never starts): it gets no work, its node is dropped after
`worker_start_timeout_s`, and every submission is judged elsewhere; with no node left, a clear error.

Two Ray nodes on this machine (ray.cluster_utils.Cluster: real raylets). A node's CPU is taken by another
actor after its judge actor is killed, so the pool's replacement stays pending as it would on a dead node."""

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from codefu.judge import JudgeConfig
from codefu.judge.pool import PoolConfig, RayJudgePool
from codefu.types import Problem, Status, TestCase

pytestmark = pytest.mark.slow  # Ray start-ups: the slow tier (`-m slow`)

PROBLEM = Problem("double", "", [], [TestCase(f"{i}\n", f"{2 * i}\n") for i in range(3)], time_limit_s=2)
SLOW_RIGHT = "```python\nimport time\ntime.sleep(0.3)\nprint(2 * int(input()))  # {k}\n```"
# judge_identical_once would run the pool on a thread of its own; without it the pool works only while the
# test takes verdicts, so the test can kill an actor and take its CPU before the pool sees the death
JUDGE = JudgeConfig(judge_identical_once=False)


@ray.remote
class CpuHolder:
    def ready(self) -> bool:
        return True


def take_the_cpus(node_id: str, cpus: float):
    holder = CpuHolder.options(
        num_cpus=cpus, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    ).remote()
    ray.get(holder.ready.remote(), timeout=60)
    return holder


@pytest.fixture
def two_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    yield
    ray.shutdown()
    cluster.shutdown()


def test_a_replacement_that_cannot_start_gets_no_work_and_its_node_is_dropped(two_nodes):
    pool = RayJudgePool(
        JUDGE,
        PoolConfig(in_flight_per_worker=1, worker_start_timeout_s=5, submission_timeout_s=60),
    )
    try:
        assert len(pool.slots) == 2
        stream = pool.judge_many([(PROBLEM, SLOW_RIGHT.format(k=k)) for k in range(8)])
        verdicts = dict([next(stream)])
        victim = pool.slots[1]
        ray.kill(victim.actor, no_restart=True)
        holder = take_the_cpus(victim.node_id, 1)
        verdicts.update(stream)
        assert sorted(verdicts) == list(range(8))
        wrong = {
            i: (v.status.value, v.message) for i, v in verdicts.items() if v.status is not Status.ACCEPTED
        }
        assert not wrong, wrong
        assert victim not in pool.slots
        assert list(pool.compile_cache_stats()) == [pool.slots[0].node_id]
        ray.kill(holder)
    finally:
        pool.close()


def test_no_worker_left_is_a_clear_error_not_a_hang(two_nodes):
    pool = RayJudgePool(JUDGE, PoolConfig(in_flight_per_worker=1, worker_start_timeout_s=5))
    try:
        stream = pool.judge_many([(PROBLEM, SLOW_RIGHT.format(k=k)) for k in range(6)])
        next(stream)
        holders = []
        for slot in list(pool.slots):
            ray.kill(slot.actor, no_restart=True)
            holders.append(take_the_cpus(slot.node_id, 1))
        with pytest.raises(RuntimeError, match="the judge has no worker left: .* did not answer in 5 s"):
            list(stream)
    finally:
        pool.close()
