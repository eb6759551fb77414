"""How the head tells the workers that the job is over, and with which status.

The head writes one record, the outcome, into the GCS key-value store when the entrypoint has ended
(or the launch failed). Workers poll for it, acknowledge it with a key of their own, stop their Ray and
exit with the outcome's status. The head waits (bounded) for every acknowledgement before stopping its
Ray, because stopping it takes the store away. A worker that cannot reach the head for a while gives up
with EXIT_HEAD_LOST. See docs/launcher.md for the failure cases.
"""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass

NAMESPACE = "codefu_launch"
OUTCOME_KEY = "outcome"
ACK_PREFIX = "ack/"

EXIT_LAUNCH_FAILED = 2
"""Bad environment, a worker that cannot join, nodes missing at the deadline (as other CLI errors)."""
EXIT_HEAD_LOST = 3
"""A worker lost the head before it published an outcome."""


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    reason: str

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> Outcome:
        obj = json.loads(data)
        return cls(int(obj["exit_code"]), str(obj["reason"]))


def exit_status(returncode: int) -> int:
    """A process's status as a shell reports it: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def describe(code: int) -> str:
    if code > 128 and code - 128 in signal.Signals._value2member_map_:
        return f"status {code} ({signal.Signals(code - 128).name})"
    return f"status {code}"


def ack_key(host: str) -> str:
    return ACK_PREFIX + host
