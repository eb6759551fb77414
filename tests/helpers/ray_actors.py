"""Ray actors in tests."""

import time


def kill_and_wait(actor, timeout_s: float = 60.0) -> None:
    """`ray.kill(actor)` and return once Ray reports it dead: the kill is asynchronous, and a call made
    right after it can still reach the live process and succeed (seen under a full test run's load)."""
    import ray._private.state

    ray.kill(actor)
    deadline = time.monotonic() + timeout_s
    while ray._private.state.actors(actor._actor_id.hex()).get("State") != "DEAD":
        if time.monotonic() > deadline:
            raise TimeoutError(f"actor {actor} not dead {timeout_s:g} s after ray.kill")
        time.sleep(0.05)
