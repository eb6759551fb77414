"""Malformed and hostile request bodies for `codefu serve`, built deterministically, shared by the unit test
of the request parsers (tests/unit/test_serve_fuzz.py) and the test that posts them to a real server
(tests/e2e/test_serve_hostile.py).

Every body is raw bytes (broken JSON included). `Case.expect` says what the parser must do with it on the
endpoint it was written for: "ok" (parses), "refused" (a 4xx; `status` when one is required) or "any"
(either; mutations whose fate is not the point). On the other endpoint every body may only parse or be
refused: never anything else.

Bodies naming a dangerous python checker (`DANGEROUS_CHECKERS`) carry tests and a response that would
make the checker, were it called as the judge calls one (input, expected, actual), create a file in
`marker_dir` or delete `victim_dir(marker_dir)`: the real-server test asserts neither happens.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AB_PY = "a, b = map(int, input().split())\nprint(a + b)"
RESPONSE = f"```python\n{AB_PY}\n```"
# judged without running anything (NO_CODE): the response of the bodies that mutate one field each, which
# are about parsing (posted, the ~1,300 of them that parse would each run a program: a minute on 2 cores)
NO_CODE = "I give up."
TESTS = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}]

# import paths a dataset row or a request could name as a python checker, called f(input, expected, actual)
# in the judge's own process, outside the sandbox: none may be importable from a request
DANGEROUS_CHECKERS = (
    "timeit:timeit",  # timeit(stmt=input, setup=expected, ...) executes `setup`
    "builtins:exec",
    "builtins:eval",
    "os:system",
    "subprocess:call",
    "subprocess:run",
    "os:symlink",  # symlink(input, expected): a link at a path the test names
    "os:execl",  # execl(input, expected, actual): the replica becomes another program
    "shutil:rmtree",  # rmtree(input, ...): deletes a folder the test names
    "shutil:copyfile",
    "shutil:move",  # move(input, expected): a file the test names moves to where it says
    "pickle:loads",
    "os:remove",
    "runpy:run_path",
    "codefu.judge.checker:tokens_any_order\x00",  # near-misses of the built-in checker
    " codefu.judge.checker:tokens_any_order",
    "codefu.judge.checker:tokens_any_order:x",
    "codefu.judge.checker:load_python_checker",
)
# those that, called so with the corpus' tests, do the harm (tests/unit/test_serve_fuzz.py shows it in a
# temporary folder); the others raise on that call, which is luck, not safety
HARMFUL_CHECKERS = ("timeit:timeit", "os:symlink", "shutil:rmtree", "shutil:move")
BUILTIN_CHECKER = "codefu.judge.checker:tokens_any_order"

_RAW = "\x01RAW:"  # a string value starting so stands for its literal JSON text (NaN, 1e400, ...)
_RAW_VALUE = re.compile(r'"\\u0001RAW:([^"\\]*)"')


@dataclass(frozen=True)
class Case:
    endpoint: str  # "run_code" or "judge": the one the body is written for
    name: str  # what it tries (failure messages print it with the body's head)
    body: bytes
    expect: str = "any"  # "ok", "refused" or "any" on `endpoint`
    status: int | None = None  # the 4xx required when refused, if one is
    dangerous: bool = False  # names a python checker that must not run

    def head(self, most: int = 300) -> str:
        text = self.body[:most].decode("utf-8", errors="backslashreplace")
        return text + (f"... ({len(self.body)} bytes)" if len(self.body) > most else "")


def raw(literal: str) -> str:
    """A value `dumps` writes as the literal text itself (no quotes, backslashes)."""
    return _RAW + literal


def dumps(value: Any) -> str:
    """JSON text of `value`, with `raw` values written as their literal."""
    return _RAW_VALUE.sub(r"\1", json.dumps(value))


def marker(marker_dir: str, tag: str) -> str:
    return str(Path(marker_dir) / f"marker-{re.sub(r'[^A-Za-z0-9]+', '_', tag)}")


def victim_dir(marker_dir: str) -> str:
    """A folder with a file in it that a dangerous checker body would delete (the e2e test creates it)."""
    return str(Path(marker_dir) / "victim")


# ---- the valid bodies everything else is built from ---------------------------------------------------


def run_code_body() -> dict[str, Any]:
    return {
        "code": AB_PY,
        "language": "python",
        "stdin": "1 2\n",
        "compile_timeout": 10,
        "run_timeout": 2,
        "memory_limit_MB": 256,
        "files": {},
        "fetch_files": [],
    }


def problem() -> dict[str, Any]:
    return {
        "name": "ab",
        "statement": "Print a+b.",
        "public_tests": [TESTS[0]],
        "tests": [TESTS[1]],
        "time_limit_s": 1,
        "memory_limit_bytes": 256 << 20,
        "rating": 800,
        "language": "python",
    }


def ground_truth() -> dict[str, Any]:
    return {
        "name": "ab",
        "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
        "private_tests": {"input": ["5 7\n"], "output": ["12\n"]},
        "time_limit": {"seconds": 1, "nanos": 0},
        "memory_limit_bytes": 256 << 20,
        "cf_rating": 800,
    }


def judge_problem_body(response: str = RESPONSE, **problem_fields: Any) -> dict[str, Any]:
    return {"response": response, "problem": {**problem(), **problem_fields}}


def judge_ground_truth_body(
    as_text: bool = False, response: str = RESPONSE, **extra_info: Any
) -> dict[str, Any]:
    gt = ground_truth()
    return {
        "response": response,
        "ground_truth": dumps(gt) if as_text else gt,
        "extra_info": {"language": "python", "statement": "Print a+b.", **extra_info},
        "data_source": "fuzz",
    }


def _bytes(value: Any) -> bytes:
    return dumps(value).encode()


def _with(body: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    """A copy of `body` with `value` at `path` (keys and list indexes; a key "~text" below means: the
    value there is JSON text, which is decoded, changed, and written back as text)."""
    out = copy.deepcopy(body)
    _set(out, path, value)
    return out


def _set(node: Any, path: tuple, value: Any) -> None:
    key, rest = path[0], path[1:]
    if not rest:
        node[key] = value
        return
    if len(rest) >= 1 and rest[0] == "~text":
        inner = json.loads(node[key]) if isinstance(node[key], str) else node[key]
        if rest[1:]:
            _set(inner, rest[1:], value)
        else:
            inner = value
        node[key] = dumps(inner)
        return
    _set(node[key], rest, value)


def _without(body: dict[str, Any], path: tuple) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node = out
    for key in path[:-1]:
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        del node[path[-1]]
    return out


# ---- the corpus -----------------------------------------------------------------------------------------


def valid_cases(marker_dir: str) -> list[Case]:
    """Bodies that must parse (and, posted, be answered 200 with the right verdict)."""
    return [
        Case("run_code", "valid: python a+b", _bytes(run_code_body()), "ok"),
        Case(
            "run_code",
            "valid: C++ a+b",
            _bytes(
                {
                    "code": '#include <cstdio>\nint main(){int a,b;scanf("%d %d",&a,&b);printf("%d\\n",a+b);}',
                    "language": "cpp",
                    "stdin": "1 2\n",
                }
            ),
            "ok",
        ),
        Case(
            "run_code",
            "valid: a file beside the program",
            _bytes(
                {
                    "code": "print(open('data.txt').read())",
                    "language": "python",
                    "files": {"data.txt": base64.b64encode(b"hello").decode()},
                }
            ),
            "ok",
        ),
        Case("run_code", "valid: utf-8 BOM", b"\xef\xbb\xbf" + _bytes(run_code_body()), "ok"),
        Case("judge", "valid: inline problem", _bytes(judge_problem_body()), "ok"),
        Case("judge", "valid: ground_truth object", _bytes(judge_ground_truth_body()), "ok"),
        Case("judge", "valid: ground_truth JSON text", _bytes(judge_ground_truth_body(as_text=True)), "ok"),
        Case(
            "judge",
            "valid: the built-in python checker",
            _bytes(judge_problem_body(checker={"kind": "python", "source": BUILTIN_CHECKER})),
            "ok",
        ),
        Case(
            "judge",
            "valid: a checker program that tries to write on the host (runs in the sandbox)",
            _bytes(
                judge_problem_body(
                    checker={
                        "kind": "program",
                        "language": "python",
                        "source": f"open({marker(marker_dir, 'checker program')!r}, 'w').write('x')\n",
                    }
                )
            ),
            "ok",
        ),
        Case("judge", "valid: reward named", _bytes({**judge_problem_body(), "reward": "codefu"}), "ok"),
    ]


def broken_json_cases() -> Iterator[Case]:
    bases = [("run_code", _bytes(run_code_body())), ("judge", _bytes(judge_problem_body()))]
    bases.append(("judge", _bytes(judge_ground_truth_body(as_text=True))))
    for endpoint, body in bases:
        for i in range(1, 25):  # every proper prefix of an object is invalid JSON
            cut = len(body) * i // 25
            yield Case(endpoint, f"truncated at {cut}", body[:cut], "refused", 400)
    rng = random.Random(41)
    for endpoint, body in bases:
        for _ in range(40):
            at = rng.randrange(len(body))
            flipped = body[:at] + bytes([rng.randrange(256)]) + body[at + 1 :]
            yield Case(endpoint, f"byte {at} changed", flipped)
    invalid_utf8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80"]
    for endpoint, body in bases:
        at = body.index(b'": "') + 4  # inside the first string value
        for bad in invalid_utf8:
            yield Case(endpoint, f"invalid UTF-8 {bad!r}", body[:at] + bad + body[at:], "refused", 400)
    for endpoint, body in bases:
        yield Case(endpoint, "UTF-16", body.decode().encode("utf-16"), "refused", 400)
        yield Case(endpoint, "trailing garbage", body + b" x", "refused", 400)
        yield Case(endpoint, "two objects", body + body, "refused", 400)
        yield Case(endpoint, "inside an array", b"[" + body + b"]", "refused", 400)
        yield Case(endpoint, "NUL appended", body + b"\x00", "refused", 400)
        yield Case(endpoint, "single quotes", body.replace(b'"', b"'"), "refused", 400)
    odd = [b"", b" ", b"\n", b"null", b"true", b"0", b"-1", b'"x"', b"[]", b"[{}]", b"{}", b"{", b"}", b"{,}"]
    odd += [b'{"code"}', b'{"a":}', b"{/* c */}", b"{'a': 1}", b"\x00", b"\xef\xbb\xbf", b"{" * 3, b"[1,]"]
    for endpoint in ("run_code", "judge"):
        for body in odd:
            yield Case(endpoint, f"odd body {body[:20]!r}", body, "refused")
    dup = b'{"code": 1, "code": "print(1)", "language": "python"}'
    yield Case("run_code", "duplicate keys (the last wins)", dup, "ok")


def deep_cases() -> Iterator[Case]:
    def nested(depth: int, kind: str) -> str:
        return ("[" * depth + "]" * depth) if kind == "[" else ('{"a":' * depth + "1" + "}" * depth)

    def expect(levels_above: int, depth: int) -> str:
        return "refused" if levels_above + depth > 64 else "any"  # protocol.MAX_JSON_DEPTH

    for depth in (62, 63, 64, 65, 100, 1000, 100_000):
        for kind in ("[", "{"):
            text = nested(depth, kind)
            yield Case("run_code", f"the body nested {depth} {kind}", text.encode(), "refused")
            code = _bytes(run_code_body()).replace(b'"code": ', f'"x": {text}, "code": '.encode(), 1)
            yield Case("run_code", f"a field nested {depth} {kind}", code, expect(1, depth))
            judge = _bytes(judge_problem_body()).replace(
                b'"name": ', f'"extra": {text}, "name": '.encode(), 1
            )
            yield Case("judge", f"problem.extra nested {depth} {kind}", judge, expect(2, depth))
            gt = judge_ground_truth_body()  # ground_truth's text is read on its own
            gt["ground_truth"] = dumps(gt["ground_truth"]).replace('"name": ', f'"x": {text}, "name": ', 1)
            yield Case("judge", f"ground_truth text nested {depth} {kind}", _bytes(gt), expect(1, depth))
            checker = judge_ground_truth_body(
                checker=f'{{"kind": "program", "source": "x", "files": {text}}}'
            )
            yield Case("judge", f"extra_info.checker text nested {depth} {kind}", _bytes(checker))
            tests = judge_ground_truth_body(as_text=True)
            public = '{"input": ' + text + ', "output": ["1"]}'
            tests["ground_truth"] = dumps({**ground_truth(), "public_tests": public})
            yield Case("judge", f"public_tests text nested {depth} {kind}", _bytes(tests))
    unclosed = ["[" * 100_000, '{"a":' * 100_000, '{"code": ' + "[" * 50_000]
    for text in unclosed:
        yield Case("run_code", f"unclosed nesting {text[:8]}", text.encode(), "refused", 400)


# raw JSON number literals; those Python's json reads but the service must refuse come first
BAD_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9" * 5000, "-" + "9" * 4301)
NUMBERS = BAD_NUMBERS + (
    "1e308", "-1e308", "9" * 4300, "9" * 400, str(2**63), str(2**64), str(-(2**63) - 1), "0", "-0", "-1",
    "0.5", "1e-9", "1e-400", "5e-324", "1", "1.5", "60", "60.000001", "61", "4096", "4097", "1e6", "1e15",
)  # fmt: skip
# JSON values of every type, for fields that expect another
VALUES: tuple[Any, ...] = (
    None, True, False, 0, -1, 1.5, "", "x", "1", "-1", "NaN", "1e400", [], [1], ["x"], [[]], [None], {},
    {"a": 1}, {"input": "1", "output": "1"}, {"seconds": "x"}, "\ud800", "a" * 300, "python\x00", "../x",
)  # fmt: skip


def _field_paths() -> dict[str, list[tuple[str, dict[str, Any], tuple]]]:
    """(endpoint, body, path) of every field the parsers read, grouped by what holds them. A checker or a
    function spec is only in the bodies whose mutations are about it: posted, most bodies that still
    parse are judged, and a checker program doubles the runs."""
    run = run_code_body()
    checker = {"kind": "program", "language": "python", "source": "print('ok')", "files": {"testlib.h": "//"}}
    function = {"entry_point": "f", "starter_code": "def f(x):", "unwrap_singleton": False}
    inline, inline_checker = judge_problem_body(NO_CODE), judge_problem_body(NO_CODE, checker=checker)
    gt_obj, gt_text = judge_ground_truth_body(False, NO_CODE), judge_ground_truth_body(True, NO_CODE)
    gt_checker = judge_ground_truth_body(False, NO_CODE, checker=checker)
    gt_function = judge_ground_truth_body(False, NO_CODE, function=function)
    gt_checker_text = judge_ground_truth_body(True, NO_CODE, checker=dumps(checker))
    out: dict[str, list[tuple[str, dict[str, Any], tuple]]] = {}
    out["run_code"] = [("run_code", run, (k,)) for k in [*run, "x-unknown"]]
    out["run_code"] += [("run_code", _with(run, ("files",), {"a.txt": "aGk="}), ("files", "a.txt"))]
    only = {"response": NO_CODE}
    out["judge"] = [("judge", inline, (k,)) for k in ("response", "reward", "extra_info", "data_source")]
    out["judge"] += [("judge", only, (k,)) for k in ("name", "index", "problem", "ground_truth")]
    problem_keys = [*inline["problem"], "private_tests", "prompt", "extra", "source", "split", "input_file"]
    problem_keys += ["solutions", "generated_tests", "x-unknown"]
    out["problem"] = [("judge", inline, ("problem", k)) for k in problem_keys]
    out["problem"] += [("judge", inline, ("problem", "tests", 0, k)) for k in ("input", "output")]
    out["problem"] += [("judge", inline, ("problem", "tests", 0)), ("judge", inline, ("problem", "checker"))]
    checker_keys = [("kind",), ("source",), ("language",), ("files",), ("files", "testlib.h")]
    out["problem"] += [("judge", inline_checker, ("problem", "checker", *k)) for k in checker_keys]
    gt_keys = [*ground_truth(), "inputs", "outputs", "input", "output", "rating"]
    gt_keys = [(k,) for k in gt_keys] + [("time_limit", "seconds"), ("time_limit", "nanos")]
    gt_keys += [("private_tests", "input"), ("private_tests", "output"), ("private_tests", "input", 0)]
    out["ground_truth"] = [("judge", gt_obj, ("ground_truth", *k)) for k in gt_keys]
    out["ground_truth"] += [("judge", gt_text, ("ground_truth", "~text", *k)) for k in gt_keys]
    extra_keys = [("language",), ("statement",), ("source_id",), ("checker",), ("function",)]
    out["extra_info"] = [("judge", gt_obj, ("extra_info", *k)) for k in extra_keys]
    out["extra_info"] += [("judge", gt_checker, ("extra_info", "checker", *k)) for k in checker_keys]
    out["extra_info"] += [("judge", gt_function, ("extra_info", "function", k)) for k in function]
    out["extra_info"] += [
        ("judge", gt_checker_text, ("extra_info", "checker", "~text", k)) for k in ("kind", "source", "files")
    ]
    return out


def wrong_type_cases() -> Iterator[Case]:
    for group, fields in _field_paths().items():
        for endpoint, body, path in fields:
            where = ".".join(str(p) for p in path if p != "~text")
            for value in VALUES:
                yield Case(endpoint, f"{group}: {where} = {value!r:.40}", _bytes(_with(body, path, value)))
            if len(path) > 1 or path[0] not in ("name", "index", "problem", "ground_truth"):
                yield Case(endpoint, f"{group}: {where} left out", _bytes(_without_text(body, path)))


def _without_text(body: dict[str, Any], path: tuple) -> dict[str, Any]:
    if "~text" not in path:
        return _without(body, path)
    at = path.index("~text")
    inner = json.loads(_dig(body, path[:at]))
    return _with(body, path[:at], dumps(_without(inner, path[at + 1 :])) if path[at + 1 :] else "")


def _dig(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def number_cases() -> Iterator[Case]:
    fields = [
        ("run_code", run_code_body(), (k,)) for k in ("compile_timeout", "run_timeout", "memory_limit_MB")
    ]
    fields += [("judge", {"response": NO_CODE}, ("index",))]
    inline = judge_problem_body(NO_CODE)
    fields += [("judge", inline, ("problem", k)) for k in ("time_limit_s", "memory_limit_bytes", "rating")]
    gt_paths = [("time_limit",), ("time_limit", "seconds"), ("time_limit", "nanos"), ("memory_limit_bytes",)]
    gt_paths += [("cf_rating",), ("private_tests", "input", 0)]
    for as_text in (False, True):
        text = ("~text",) if as_text else ()
        body = judge_ground_truth_body(as_text, NO_CODE)
        fields += [("judge", body, ("ground_truth", *text, *p)) for p in gt_paths]
    for endpoint, body, path in fields:
        where = ".".join(str(p) for p in path if p != "~text")
        for literal in NUMBERS:
            expect = "refused" if literal in BAD_NUMBERS else "any"
            name = f"{where} = {literal[:20]}" + ("..." if len(literal) > 20 else "")
            yield Case(
                endpoint,
                name,
                _bytes(_with(body, path, raw(literal))),
                expect,
                400 if expect == "refused" else None,
            )


def limit_cases() -> Iterator[Case]:
    """Limits just inside and outside the service's (ServiceLimits' defaults: 60 s, 1 to 4096 MB)."""
    run = run_code_body()
    refused = {
        "run_timeout": [0, -1, 60.5, 61, 1e6],
        "compile_timeout": [0, -0.5, 61, 1e9],
        "memory_limit_MB": [0.5, 1e-9, 0.999, 4097, 1e15, 2**63],
    }
    ok = {"run_timeout": [0.001, 60], "compile_timeout": [60], "memory_limit_MB": [-1, 0, 1, 1.5, 4096, None]}
    for key, values in refused.items():
        for v in values:
            yield Case("run_code", f"{key} = {v}", _bytes(_with(run, (key,), v)), "refused", 400)
    for key, values in ok.items():
        for v in values:
            yield Case("run_code", f"{key} = {v}", _bytes(_with(run, (key,), v)), "ok")
    inline_refused = {
        "time_limit_s": [0, -1, -1e-300, 60.001, 61, 1e6, 1e300],
        "memory_limit_bytes": [-1, 1000, (1 << 20) - 1, (4096 << 20) + 1, 1e15, 2**63, 10**100],
    }
    for key, values in inline_refused.items():
        for v in values:
            body = judge_problem_body(**{key: v})
            yield Case("judge", f"problem.{key} = {v}", _bytes(body), "refused", 400)
    for key, v in [("time_limit_s", 60), ("time_limit_s", 1e-6), ("memory_limit_bytes", 1 << 20)]:
        yield Case("judge", f"problem.{key} = {v}", _bytes(judge_problem_body(**{key: v})), "ok")
    yield Case(
        "judge",
        "problem.memory_limit_bytes = 0",
        _bytes(judge_problem_body(memory_limit_bytes=0)),
        "refused",
        400,
    )
    gt_refused = [
        ("time_limit", 1e6),
        ("time_limit", -5),
        ("time_limit", {"seconds": 61, "nanos": 0}),
        ("time_limit", {"seconds": 60, "nanos": 1e9}),
        ("time_limit", {"seconds": 1e308, "nanos": 1e308}),
        ("time_limit", {"seconds": 1.7976931348623157e308, "nanos": 1.7976931348623157e308}),  # sums to inf
        ("time_limit", "1e400"),
        ("time_limit", "nan"),
        ("memory_limit_bytes", 1e15),
        ("memory_limit_bytes", 1000),
        ("memory_limit_bytes", -1),
        ("memory_limit_bytes", "1e15"),
        ("memory_limit_bytes", 10**100),
    ]
    gt_ok = [("time_limit", 60), ("time_limit", {"seconds": 0, "nanos": 0}), ("memory_limit_bytes", 0)]
    for as_text in (False, True):
        text = ("~text",) if as_text else ()
        body = judge_ground_truth_body(as_text)
        for key, v in gt_refused:
            yield Case(
                "judge",
                f"ground_truth.{key} = {v}",
                _bytes(_with(body, ("ground_truth", *text, key), v)),
                "refused",
                400,
            )
        for key, v in gt_ok:
            yield Case(
                "judge",
                f"ground_truth.{key} = {v}",
                _bytes(_with(body, ("ground_truth", *text, key), v)),
                "ok",
            )


def dangerous_test(source: str, marker_dir: str) -> tuple[str, str]:
    """(input, expected output) of a test that makes python checker `source`, called (input, expected,
    actual) with actual = the response's output (the marker's path), write `marker(marker_dir, source)`
    or delete `victim_dir(marker_dir)`."""
    m, victim = marker(marker_dir, source), victim_dir(marker_dir)
    return {
        "timeit:timeit": ("pass", f"open({m!r}, 'w').close()"),  # timeit(stmt, setup, ...) runs `setup`
        "builtins:exec": (f"open({m!r}, 'w').close()", "{}"),
        "builtins:eval": (f"open({m!r}, 'w').close()", "{}"),
        "os:system": (f"touch {m}", "x"),
        "subprocess:call": (f"touch {m}", "x"),
        "subprocess:run": (f"touch {m}", "x"),
        "os:symlink": ("/etc/passwd", m),
        "os:execl": ("/usr/bin/touch", "touch"),  # execl(path, arg0, actual): touch <the marker>
        "shutil:rmtree": (victim, ""),
        "shutil:copyfile": ("/etc/passwd", m),
        "shutil:move": (str(Path(victim) / "file"), m),
        "os:remove": (str(Path(victim) / "file"), ""),
        "runpy:run_path": (f"{victim}/file", ""),
    }.get(source, (f"open({m!r}, 'w').close()", m))


def checker_cases(marker_dir: str) -> Iterator[Case]:
    """Dangerous python checkers, inline and in a verl row's extra_info (as an object and as JSON text),
    each with tests that would make it write a marker or delete the victim folder if it were called."""
    for source in DANGEROUS_CHECKERS:
        m = marker(marker_dir, source)
        test = dangerous_test(source, marker_dir)
        tests = [{"input": test[0], "output": test[1]}]
        response = f"```python\nprint({m!r}, end='')\n```"
        spec = {"kind": "python", "source": source}
        inline = {"response": response, "problem": {"statement": "x", "tests": tests, "checker": spec}}
        gt = {"private_tests": {"input": [test[0]], "output": [test[1]]}, "time_limit": 1}
        rows = [
            ("inline", inline),
            ("inline, language python", _with(inline, ("problem", "language"), "python")),
            ("ground_truth + extra_info.checker object", {"response": response, "ground_truth": gt, "extra_info": {"checker": spec}}),
            ("ground_truth + extra_info.checker text", {"response": response, "ground_truth": gt, "extra_info": {"checker": dumps(spec)}}),
            ("ground_truth text + extra_info.checker text", {"response": response, "ground_truth": dumps(gt), "extra_info": {"checker": dumps(spec), "language": "python"}}),
        ]  # fmt: skip
        for how, body in rows:
            yield Case(
                "judge", f"python checker {source!r}, {how}", _bytes(body), "refused", 403, dangerous=True
            )


def file_cases() -> Iterator[Case]:
    run = {"code": "print(open('data.txt').read())", "language": "python"}
    hi = base64.b64encode(b"hi").decode()
    bad_names = ["../up", "/etc/passwd", "", ".", "..", "a/b", "main.cpp", "main.py", "main", "compile.out"]
    bad_names += ["compile.err", "a\x00b", "a b", "é.txt", ".hidden", "-rf", "a" * 101, "\ud800", "x\n", "*"]
    for name in bad_names:
        yield Case(
            "run_code", f"file name {name!r:.30}", _bytes({**run, "files": {name: hi}}), "refused", 400
        )
    for name in ["data.txt", "a" * 100, "A-1_b.c+", "testlib.h", "0"]:
        yield Case("run_code", f"file name {name!r:.30}", _bytes({**run, "files": {name: hi}}), "ok")
    bad_contents = ["not base64!", "aGk", "aGk=\n", base64.b64encode(b"\xff\xfe").decode()]
    bad_contents += [
        base64.b64encode(b"\xed\xa0\x80").decode(),
        base64.b64encode("é".encode("latin-1")).decode(),
    ]
    for content in bad_contents:
        yield Case(
            "run_code",
            f"file content {content!r:.30}",
            _bytes({**run, "files": {"data.txt": content}}),
            "refused",
            400,
        )
    for content in [1, [], {}, True, 1.5]:
        yield Case(
            "run_code",
            f"file content {content!r}",
            _bytes({**run, "files": {"data.txt": content}}),
            "refused",
            400,
        )
    for content in [
        None,
        "",
        base64.b64encode(b"x" * (1 << 20)).decode(),
        base64.b64encode(b"\x00\x01").decode(),
    ]:
        yield Case(
            "run_code", f"file content {content!r:.30}", _bytes({**run, "files": {"data.txt": content}}), "ok"
        )
    many = {f"f{i}.txt": hi for i in range(16)}
    yield Case("run_code", "16 files", _bytes({**run, "files": many}), "ok")
    yield Case("run_code", "17 files", _bytes({**run, "files": {**many, "g.txt": hi}}), "refused", 400)
    yield Case(
        "run_code",
        "10,000 files",
        _bytes({**run, "files": {f"f{i}": hi for i in range(10_000)}}),
        "refused",
        400,
    )
    checker = {"kind": "program", "language": "python", "source": "print('ok')"}
    for name in ["../up", "main.py", "a/b", ""]:
        body = judge_problem_body(checker={**checker, "files": {name: "x"}})
        yield Case("judge", f"checker file name {name!r}", _bytes(body), "refused", 400)
    yield Case(
        "judge",
        "checker file content 1",
        _bytes(judge_problem_body(checker={**checker, "files": {"a": 1}})),
        "refused",
        400,
    )


def size_cases() -> Iterator[Case]:
    limit = 256 << 10
    for code, expect, status in [
        ("#" * limit, "ok", None),
        ("#" * (limit + 1), "refused", 413),
        ("é" * (limit // 2 + 1), "refused", 413),  # fewer characters than bytes
    ]:
        yield Case(
            "run_code",
            f"code of {len(code)} characters",
            _bytes({**run_code_body(), "code": code}),
            expect,
            status,
        )
    big_checker = {"kind": "program", "language": "python", "source": "#" * (limit + 1)}
    yield Case(
        "judge",
        "checker source over the limit",
        _bytes(judge_problem_body(checker=big_checker)),
        "refused",
        413,
    )
    tests = [{"input": f"{i} 1\n", "output": f"{i + 1}\n"} for i in range(1001)]
    big = {"response": NO_CODE, "problem": {"statement": "x", "tests": tests}}
    yield Case("judge", "1,001 tests", _bytes(big), "refused", 413)
    yield Case("judge", "1,000 tests", _bytes(_with(big, ("problem", "tests"), tests[:1000])), "ok")
    gt = {
        "response": NO_CODE,
        "ground_truth": {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests]},
    }
    yield Case("judge", "1,001 ground_truth tests", _bytes(gt), "refused", 413)
    yield Case(
        "run_code",
        "a 4 MB stdin",
        _bytes({**run_code_body(), "code": "pass", "stdin": "x" * (4 << 20)}),
        "ok",
    )
    yield Case("judge", "a 4 MB response", _bytes(judge_problem_body() | {"response": "x" * (4 << 20)}), "ok")
    yield Case(
        "run_code",
        "10,000 unknown fields",
        _bytes({**run_code_body(), **{f"k{i}": i for i in range(10_000)}}),
        "ok",
    )


def text_cases() -> Iterator[Case]:
    """Lone surrogates, control characters and odd text where the parsers take strings."""
    texts = ["\ud800", "\udfff", "a\ud800b", "\x00", "\x1b[31m", "\u202e", "\U0010ffff", "\r\n"]
    for t in texts:
        yield Case("run_code", f"code {t!r}", _bytes({**run_code_body(), "code": f"# {t}\nprint(1)"}))
        yield Case("run_code", f"stdin {t!r}", _bytes({**run_code_body(), "stdin": t}))
        yield Case(
            "run_code",
            f"language {t!r}",
            _bytes({**run_code_body(), "language": f"python{t}"}),
            "refused",
            400,
        )
        yield Case("judge", f"response {t!r}", _bytes({**judge_problem_body(), "response": RESPONSE + t}))
        yield Case(
            "judge",
            f"test input {t!r}",
            _bytes(_with(judge_problem_body(), ("problem", "tests", 0, "input"), t)),
        )
        yield Case("judge", f"name {t!r}", _bytes(_with(judge_problem_body(), ("problem", "name"), t)))
    for reward in ["binary", "CODEFU", "codefu ", ""]:
        yield Case(
            "judge", f"reward {reward!r}", _bytes({**judge_problem_body(), "reward": reward}), "refused", 400
        )
    both = {**judge_problem_body(), "ground_truth": ground_truth()}
    yield Case("judge", "problem and ground_truth", _bytes(both), "refused", 400)
    yield Case("judge", "no tests", _bytes(judge_problem_body(public_tests=[], tests=[])), "refused", 400)
    yield Case(
        "run_code", "fetch_files", _bytes({**run_code_body(), "fetch_files": ["out.txt"]}), "refused", 400
    )


def corpus(marker_dir: str) -> list[Case]:
    """Every case, in a fixed order (the same on every run)."""
    return [
        *valid_cases(marker_dir),
        *broken_json_cases(),
        *deep_cases(),
        *wrong_type_cases(),
        *number_cases(),
        *limit_cases(),
        *checker_cases(marker_dir),
        *file_cases(),
        *size_cases(),
        *text_cases(),
    ]
