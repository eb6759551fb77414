"""A process group's rendezvous: rank 0 listens on a port the kernel gives it as it binds, so no other
process can take the port first (a port picked free and bound later once met EADDRINUSE on a Ray node)."""

from __future__ import annotations

import errno
import socket

import pytest

from codefu.trainer.distributed import joining_store, listening_store


def test_the_listening_store_holds_its_port_from_the_start():
    store = listening_store(2)
    assert store.port > 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, pytest.raises(OSError) as taken:
        s.bind(("0.0.0.0", store.port))
    assert taken.value.errno == errno.EADDRINUSE


def test_a_joining_rank_shares_the_listening_stores_keys():
    store = listening_store(2, timeout_s=30)
    other = joining_store("127.0.0.1", store.port, 2, timeout_s=30)
    other.set("from rank 1", "hello")
    store.set("from rank 0", "hi")
    assert store.get("from rank 1") == b"hello" and other.get("from rank 0") == b"hi"


def test_joining_a_port_no_one_listens_on_fails_within_its_timeout():
    store = listening_store(2)
    port = store.port
    del store  # the port is closed now
    with pytest.raises(Exception, match="(?i)timed? ?out|connect|refused"):
        joining_store("127.0.0.1", port, 2, timeout_s=2)
