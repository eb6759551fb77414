"""The rendezvous port of a process group: free, and away from the ports other processes take between
its pick and rank 0's bind (the kernel's range for outgoing connections, Ray's worker ports)."""

from __future__ import annotations

import socket

import codefu.trainer.distributed as distributed
from codefu.trainer.distributed import RENDEZVOUS_PORTS, free_port


def test_the_port_is_free_and_outside_the_ephemeral_range():
    low, high = distributed._ephemeral_ports()
    for _ in range(20):
        port = free_port()
        assert port in RENDEZVOUS_PORTS and not low <= port <= high, port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))  # free: rank 0 could listen there


def test_a_taken_port_is_not_given_and_any_free_one_is_the_fallback(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setattr(distributed, "RENDEZVOUS_PORTS", range(port, port + 1))
        monkeypatch.setattr(distributed, "_ephemeral_ports", lambda: (0, 0))
        got = distributed.free_port()
        assert got != port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", got))
