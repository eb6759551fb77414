"""The Ray side of the layout: reserve its bundles as one placement group, then start each actor in its
bundle.

    pg = reserve(layout)                                   # CodefuError if the bundles cannot be reserved
    actor_cls.options(**in_bundle(pg, slot.bundle), num_gpus=slot.gpus, ...)
    init_method = rendezvous(pg, layout.slots_of("trainer")[0].bundle)   # rank 0's node, a free port there

The same path runs on CPU-only clusters (CPU bundles), which is how the tests exercise it.
"""

from __future__ import annotations

from typing import Any

from codefu.errors import CodefuError
from codefu.orchestrator.layout import Layout
from codefu.trainer.distributed import free_port


def reserve(layout: Layout, timeout_s: float = 120.0, name: str = "") -> Any:
    """Create the layout's placement group and wait for it; on timeout remove it and say what was asked for
    and what the cluster has free (check_layout catches most impossible layouts before this)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    pg = placement_group([b.resources() for b in layout.bundles], strategy=layout.strategy, name=name)
    if not pg.wait(timeout_s):
        remove_placement_group(pg)
        asked = "; ".join(f"{i}: {b.cpus:g} CPUs, {b.gpus:g} GPUs" for i, b in enumerate(layout.bundles))
        free = ray.available_resources()
        raise CodefuError(
            f"could not reserve the placement group within {timeout_s:g} s (bundles {asked}); free now: "
            f"{free.get('CPU', 0):g} CPUs, {free.get('GPU', 0):g} GPUs -- another job may hold them"
        )
    return pg


def in_bundle(pg: Any, bundle: int) -> dict[str, Any]:
    """`.options()` that start an actor in bundle `bundle` of `pg` (its children stay in the group)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=bundle, placement_group_capture_child_tasks=True
    )
    return {"scheduling_strategy": strategy}


def _address_and_port() -> tuple[str, int]:
    import ray

    return ray.util.get_node_ip_address(), free_port()


def rendezvous(pg: Any, bundle: int) -> str:
    """A tcp:// init method on the node of `bundle` (where rank 0 will listen), on a port free there."""
    import ray

    probe = ray.remote(_address_and_port).options(num_cpus=0, **in_bundle(pg, bundle))
    address, port = ray.get(probe.remote())
    return f"tcp://{address}:{port}"


def release(pg: Any) -> None:
    from ray.util.placement_group import remove_placement_group

    remove_placement_group(pg)
