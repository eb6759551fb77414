"""The launcher's one window into a running cluster: the GCS (node table and key-value store).

This is Ray's internal `ray._raylet.GcsClient`, the client `ray start`, `ray status` and the dashboard
use. It is used here rather than a driver (`ray.init`) because a launcher must outlive the head: this
client only raises when the GCS is gone, so a worker launcher notices and exits cleanly, while what a
driver does when it loses the GCS is Ray's decision (and a driver costs a core worker per host).
It is internal API, kept to this file; the multi-host tests (tests/cluster/) exercise every call
against a real cluster, so a Ray upgrade that changes it fails there first.
"""

from __future__ import annotations

from codefu.launcher.plan import NodeView
from codefu.launcher.protocol import NAMESPACE

RPC_TIMEOUT_S = 5.0


class GcsUnavailable(Exception):
    """The GCS did not answer (the head is down, unreachable, or not up yet)."""


class Gcs:
    def __init__(self, address: str):
        from ray._raylet import GcsClient

        self.address = address
        try:
            # Blocks until the GCS answers (tens of seconds at most): connect only once its port is open.
            self._client = GcsClient(address=address)
        except Exception as e:  # noqa: BLE001 - any failure means we cannot talk to it
            raise GcsUnavailable(f"GCS at {address}: {e}") from e
        self._ns = NAMESPACE.encode()

    def nodes(self) -> list[NodeView]:
        from ray.core.generated.gcs_pb2 import GcsNodeInfo

        try:
            infos = self._client.get_all_node_info(timeout=RPC_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            raise GcsUnavailable(f"GCS at {self.address}: {e}") from e
        return [
            NodeView(
                node_id=info.node_id.hex(),
                ip=info.node_manager_address,
                alive=info.state == GcsNodeInfo.GcsNodeState.ALIVE,
                labels=dict(info.labels),
                resources=dict(info.resources_total),
            )
            for info in infos.values()
        ]

    def get(self, key: str) -> bytes | None:
        try:
            return self._client.internal_kv_get(key.encode(), self._ns, timeout=RPC_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            raise GcsUnavailable(f"GCS at {self.address}: {e}") from e

    def put(self, key: str, value: bytes) -> None:
        try:
            self._client.internal_kv_put(key.encode(), value, True, self._ns, timeout=RPC_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            raise GcsUnavailable(f"GCS at {self.address}: {e}") from e

    def keys(self, prefix: str) -> list[str]:
        try:
            keys = self._client.internal_kv_keys(prefix.encode(), self._ns, timeout=RPC_TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            raise GcsUnavailable(f"GCS at {self.address}: {e}") from e
        return [k.decode() for k in keys]
