"""The Ray side of the layout: reserve its bundles as one placement group, then start each actor in its
bundle.

    pg = reserve(layout)                                   # CodefuError if the bundles cannot be reserved
    actor_cls.options(**in_bundle(pg, slot.bundle), num_gpus=slot.gpus, ...)

The same path runs on CPU-only clusters (CPU bundles), which is how the tests exercise it.
"""

from __future__ import annotations

from typing import Any

from codefu.errors import CodefuError
from codefu.orchestrator.layout import Layout


def reserve(layout: Layout, timeout_s: float = 120.0, name: str = "") -> Any:
    """Create the layout's placement group and wait for it; on timeout remove it and say what was asked for
    and what the cluster has free (check_layout catches most impossible layouts before this)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    pg = placement_group([b.resources() for b in layout.bundles], strategy=layout.strategy, name=name)
    try:
        ready = pg.wait(timeout_s)
    except BaseException:  # e.g. Ctrl-C while waiting: the request would hold the cluster on
        remove_placement_group(pg)
        raise
    if not ready:
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


def release(pg: Any) -> None:
    from ray.util.placement_group import remove_placement_group

    remove_placement_group(pg)
