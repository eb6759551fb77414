"""The weight-broadcast group (codefu/models/weight_broadcast.py) between real processes over gloo: what
member 0 sends is what every other member receives, bit for bit; a member left waiting fails within the
timeout with an error that says what happened instead of hanging; resources.weight_transfer values that
cannot work are refused naming the key."""

import multiprocessing as mp
import re
import time

import pytest
import torch

from codefu.errors import CodefuError
from codefu.models.weight_broadcast import GroupAddress, WeightBroadcast
from codefu.models.weights import FlatLayout, pack_weights
from codefu.orchestrator.config import RunConfig, check_run_config
from codefu.orchestrator.layout import ResourcesConfig

SHAPES = [("embed.weight", (7, 5)), ("layers.0.q.weight", (5, 5)), ("layers.0.q.bias", (5,))]


def weights(seed: int) -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(name, torch.randn(shape, generator=g)) for name, shape in SHAPES]


def _receiver(
    address: GroupAddress, rank: int, dtype: torch.dtype, syncs: int, timeout_s: float, out
) -> None:
    try:
        group = WeightBroadcast.join(address, rank, torch.device("cpu"), timeout_s)
        layout = FlatLayout.of(SHAPES)
        got = []
        for _ in range(syncs):
            flat = torch.empty(layout.numel, dtype=dtype)
            group.receive(flat)
            got.append({k: v.clone() for k, v in layout.views(flat).items()})
        out.put((rank, got))
    except Exception as e:  # the parent asserts on what went wrong
        out.put((rank, e))


def _start_receivers(address, ranks, dtype, syncs, timeout_s):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_receiver, args=(address, r, dtype, syncs, timeout_s, out)) for r in ranks]
    for p in procs:
        p.start()
    return procs, out


def test_every_receiver_gets_each_sync_exactly():
    address, store = WeightBroadcast.host("127.0.0.1", 3, timeout_s=60)
    procs, out = _start_receivers(address, [1, 2], torch.bfloat16, 2, 60)
    sender = WeightBroadcast.join(address, 0, torch.device("cpu"), 60, store=store)
    assert sender.backend == "gloo"
    sent = []
    for seed in (0, 1):  # two syncs: the second overwrites nothing of the first on the receivers' side
        packed = pack_weights(weights(seed), torch.bfloat16, "cpu")
        sender.send(packed.flat)
        sent.append(packed.layout.views(packed.flat))
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
    for rank in (1, 2):
        got = results[rank]
        assert not isinstance(got, Exception), got
        for want, have in zip(sent, got, strict=True):
            assert have.keys() == want.keys()
            for name in want:
                assert have[name].dtype == torch.bfloat16
                assert torch.equal(have[name], want[name]), (rank, name)
    assert not torch.equal(got[0]["embed.weight"], got[1]["embed.weight"])  # two different syncs
    sender.close()


def test_a_receiver_whose_sender_never_sends_fails_within_the_timeout():
    address, store = WeightBroadcast.host("127.0.0.1", 2, timeout_s=30)
    procs, out = _start_receivers(address, [1], torch.float32, 1, 3)
    sender = WeightBroadcast.join(address, 0, torch.device("cpu"), 30, store=store)  # joins, never sends
    t0 = time.monotonic()
    rank, error = out.get(timeout=120)
    procs[0].join(30)
    assert time.monotonic() - t0 < 60  # not a hang (the limit is loose: timing is not what is tested)
    assert isinstance(error, RuntimeError), error
    assert "weight broadcast (gloo, member 1 of 2" in str(error), error
    assert "loop.weight_sync_timeout_s" in str(error)
    sender.close()


def test_only_member_0_sends():
    address, store = WeightBroadcast.host("127.0.0.1", 1, timeout_s=10)
    alone = WeightBroadcast.join(address, 0, torch.device("cpu"), 10, store=store)
    try:
        alone.receive(torch.zeros(3))
    except RuntimeError as e:
        assert "member 0 of the weight group sends" in str(e)
    else:
        raise AssertionError("member 0 received")
    alone.send(torch.ones(3))  # a group of one: nothing to wait for
    alone.close()


@pytest.mark.parametrize(
    "resources,message",
    [
        (ResourcesConfig(weight_transfer="nccl"), "must be store or broadcast, got 'nccl'"),
        (
            ResourcesConfig(weight_transfer="broadcast", gpus_per_rank=1),  # colocated on GPUs
            "must be store while resources.colocate is true on GPUs",
        ),
        (
            ResourcesConfig(
                weight_transfer="broadcast", colocate=False, gpus_per_rank=0.5, gpus_per_rollout_worker=0.5
            ),
            "must be store where trainer ranks or rollout workers take a share of a GPU",
        ),
    ],
)
def test_a_weight_transfer_that_cannot_work_names_its_key(resources, message):
    with pytest.raises(CodefuError, match=re.escape("resources.weight_transfer " + message)):
        check_run_config(RunConfig(resources=resources))


@pytest.mark.parametrize(
    "resources",
    [
        ResourcesConfig(weight_transfer="broadcast"),  # CPU processes: gloo
        ResourcesConfig(
            weight_transfer="broadcast", colocate=False, gpus_per_rank=1, gpus_per_rollout_worker=1
        ),
    ],
)
def test_a_broadcast_between_cpu_processes_or_whole_gpus_is_accepted(resources):
    check_run_config(RunConfig(resources=resources))


class RecordingRoles:
    """What OffPolicySampler asks of Roles with a weight broadcast, recorded in order (the Ray side is
    tests/ray/test_weight_broadcast_loop.py)."""

    weight_broadcast = True
    weight_sync_timeout_s = 5.0
    weights_version = 0

    def __init__(self):
        self.calls: list[tuple] = []
        self.rollout = self

    def receive_weights(self, version, load=True):
        self.calls.append(("receive", version, load))
        return [f"receive {version}"]

    def broadcast_weights(self, receives):
        self.calls.append(("broadcast", receives))

    def wait(self, calls, what, timeout_s):
        self.calls.append(("wait", calls))

    def push_weights(self, weights, version):
        self.calls.append(("push", weights, version))
        return [f"push {version}"]

    def load_received(self, version):
        self.calls.append(("load_received", version))

    def load_rollout_weights(self, weights, version):
        self.calls.append(("load", weights, version))

    def publish_weights(self):
        raise AssertionError("the store was used with a weight broadcast")


def sampler_at_step_0(mid_generation: bool):
    from codefu.orchestrator.off_policy import OffPolicySampler

    roles = RecordingRoles()
    inner = type("Inner", (), {"roles": roles})()
    sampler = OffPolicySampler(inner, bound=1, end=10, mid_generation=mid_generation)
    sampler._version = sampler._held = sampler._next = sampler._asked = sampler._sent_version = 0
    return sampler, roles


def test_one_step_off_keeps_each_broadcast_and_loads_the_newest_before_sampling():
    from codefu.observability.metrics import StepTimer

    sampler, roles = sampler_at_step_0(mid_generation=False)
    sampler.sync_weights(1, True, StepTimer())
    sampler.sync_weights(2, True, StepTimer())
    assert roles.calls == [
        ("receive", 1, False),  # kept, not loaded mid-generation: one_step_off never switches mid-step
        ("broadcast", ["receive 1"]),
        ("receive", 2, False),
        ("broadcast", ["receive 2"]),
    ]
    roles.calls.clear()
    sampler._catch_up()  # what the sampling thread does before it samples a step
    assert roles.calls == [("wait", ["receive 1"]), ("wait", ["receive 2"]), ("load_received", 2)]
    assert sampler._held == 2
    roles.calls.clear()
    sampler.sync_weights(3, False, StepTimer())  # a step that changed nothing: its number only
    sampler._catch_up()
    assert roles.calls == [("load", None, 3)]


def test_async_mid_generation_loads_each_broadcast_as_it_comes_and_waits_for_them():
    from codefu.observability.metrics import StepTimer

    sampler, roles = sampler_at_step_0(mid_generation=True)
    sampler.sync_weights(1, True, StepTimer())
    sampler.sync_weights(2, False, StepTimer())
    assert roles.calls == [("receive", 1, True), ("broadcast", ["receive 1"]), ("push", None, 2)]
    roles.calls.clear()
    sampler._catch_up()
    assert roles.calls == [("wait", ["receive 1"]), ("wait", ["push 2"])]
    assert sampler._held == 2
