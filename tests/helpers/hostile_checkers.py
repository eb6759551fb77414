"""`python` checkers a hostile dataset row or request may name: module:function references that, called
as checker(input, expected, actual), would run the test's strings as code or touch the host. Shared by
the checker gate's unit, judge and service tests."""

from __future__ import annotations

from pathlib import Path

DANGEROUS_CHECKERS = [
    "timeit:timeit",  # timeit(stmt=input, setup=expected, timer=actual) runs `setup`
    "os:system",
    "os:symlink",
    "os:execl",
    "subprocess:getoutput",
    "builtins:exec",
    "builtins:eval",
    "shutil:rmtree",
    "pickle:loads",
    "antigravity:geohash",  # importing it opens a web browser: the import itself must not happen
]


def marker_test(marker: Path) -> dict[str, str]:
    """A test whose expected output is Python that writes `marker` when `timeit:timeit` checks it: the
    file appearing means code from data ran outside the sandbox."""
    return {"input": "pass", "output": f"open({str(marker)!r}, 'w').write('ran outside the sandbox')"}
