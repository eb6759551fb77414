"""Test inputs as files (codefu.judge.inputs.InputFiles): shared while held, bounded when not."""

from __future__ import annotations

import threading

from codefu.judge.inputs import InputFiles


def test_the_same_input_is_one_file_and_none_is_removed_while_held(tmp_path):
    inputs = InputFiles(tmp_path, keep_bytes=10)
    with inputs.hold("a" * 8) as a, inputs.hold("a" * 8) as again:
        assert a == again and a.read_text() == "a" * 8
        with inputs.hold("b" * 8) as b:
            assert b.exists() and a.exists()  # 16 bytes held: over the bound, but held
        assert a.exists() and b.exists() and inputs.idle_bytes == 8
    assert inputs.idle_bytes <= 10
    assert not a.exists() and b.exists()  # the least recently used went first


def test_idle_inputs_stay_within_the_bound_under_threads(tmp_path):
    inputs = InputFiles(tmp_path, keep_bytes=1000)

    def runs(worker: int) -> None:
        for i in range(200):
            with inputs.hold(f"{worker} {i} " + "x" * 100) as path:
                assert path.read_text().startswith(f"{worker} {i} ")

    threads = [threading.Thread(target=runs, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert inputs.idle_bytes <= 1000
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) == inputs.idle_bytes
