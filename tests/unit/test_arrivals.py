"""`Arrivals`: what the judge takes from an iterable whose items come over time."""

import threading

import pytest

from codefu.judge.arrivals import Arrivals


def test_a_list_is_there_at_once_and_then_finished():
    arrivals = Arrivals([1, 2, 3])
    assert not arrivals.finished
    assert arrivals.take() == [1, 2, 3]
    assert arrivals.finished and arrivals.take() == []


def test_items_are_taken_as_they_come_not_when_the_iterable_ends():
    gate = threading.Event()

    def slow():
        yield "first"
        assert gate.wait(30), "the consumer never took the first item"
        yield "second"

    arrivals = Arrivals(slow())
    arrivals.wait(30)
    assert arrivals.take() == ["first"]  # while the iterable still waits
    assert not arrivals.finished
    gate.set()
    got = []
    while not arrivals.finished:
        arrivals.wait(30)
        got += arrivals.take()
    assert got == ["second"]


def test_an_error_of_the_iterable_comes_after_the_items_before_it():
    def broken():
        yield 1
        raise RuntimeError("engine died")

    arrivals = Arrivals(broken())
    taken = []
    with pytest.raises(RuntimeError, match="engine died"):
        for _ in range(1000):
            arrivals.wait(30)
            taken += arrivals.take()
    assert taken == [1]
    assert arrivals.finished  # the error was handed over once


def test_wait_returns_at_its_timeout_when_nothing_comes():
    gate = threading.Event()

    def stuck():
        gate.wait(30)
        yield 1

    arrivals = Arrivals(stuck())
    arrivals.wait(0.05)
    assert arrivals.take() == [] and not arrivals.finished
    gate.set()
    arrivals.wait(30)
    assert arrivals.take() == [1]
