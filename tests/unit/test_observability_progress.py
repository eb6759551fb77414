"""`phase_bar`: a tqdm bar where its stream is a terminal; elsewhere nothing, or a line per phase's start and
end when asked."""

import io

import pytest

from codefu.observability.progress import phase_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_the_bar() -> None:
    out = Terminal()
    with phase_bar("generate (model m)", 4, "sample", lines=True, file=out) as bar:
        bar.update(3)
    text = out.getvalue()
    assert "generate (model m)" in text and "3/4" in text and "sample/s" in text
    assert "..." not in text and "done in" not in text  # no phase lines beside a bar


def test_elsewhere_a_line_as_the_phase_starts_and_ends() -> None:
    out = io.StringIO()
    with phase_bar("judge (model m)", 8, "program", lines=True, file=out) as bar:
        bar.update(8)
    first, last = out.getvalue().splitlines()
    assert first == "judge (model m): 8 programs ..."
    assert last.startswith("judge (model m): done in ") and last.endswith(" s")


def test_elsewhere_nothing_without_lines_nor_after_an_error() -> None:
    quiet = io.StringIO()
    with phase_bar("generate (validation)", 4, "sample", file=quiet) as bar:
        bar.update(4)
    assert quiet.getvalue() == ""
    out = io.StringIO()
    with pytest.raises(RuntimeError), phase_bar("judge", 2, "program", lines=True, file=out):
        raise RuntimeError("the judge died")
    assert out.getvalue() == "judge: 2 programs ...\n"
