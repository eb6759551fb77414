import time

import pytest

from codefu.judge.extract import extract_program, guess_language, strip_reasoning


def test_last_supported_fence_wins_and_reasoning_is_ignored():
    response = (
        "<think>maybe ```python\nprint('draft')\n``` no</think>\n"
        "Here:\n```cpp\nint main(){}\n```\nOutput:\n```\n42\n```\nAnd in Java:\n```java\nclass A{}\n```\n"
    )
    program = extract_program(response, preferred="python")
    assert program is not None
    assert program.language == "cpp"
    assert program.source == "int main(){}\n"


@pytest.mark.parametrize(
    "tag,language",
    [("cpp", "cpp"), ("c++", "cpp"), ("cc", "cpp"), ("CPP", "cpp"), ("python", "python"), ("py", "python")],
)
def test_fence_tags(tag, language):
    program = extract_program(f"text\n```{tag}\nx = 1\n```\n", preferred="cpp")
    assert program is not None and program.language == language


def test_code_tags_codefu_format_with_and_without_inner_fence():
    raw = '<think>plan</think><code>\n#include <cstdio>\nint main(){puts("hi");}\n</code>'
    program = extract_program(raw, preferred="python")
    assert program.language == "cpp" and program.source.startswith("#include <cstdio>")
    fenced = "<code>\n```python\nprint(input())\n```\n</code>"
    program = extract_program(fenced, preferred="cpp")
    assert program.language == "python" and program.source == "print(input())\n"


def test_no_code_cases():
    assert extract_program("I don't know how to solve this.") is None
    assert extract_program("") is None
    # reasoning cut off by the token limit: the code inside it is a draft, not an answer
    assert extract_program("<think>```cpp\nint main(){}\n```  still thinking") is None
    # a fence left open at the end was truncated
    assert extract_program("```cpp\nint main(){\n  return 0;") is None
    # only a language we don't judge
    assert extract_program("```java\nclass Main {}\n```") is None


def test_untagged_fence_used_only_when_nothing_tagged_and_language_guessed():
    assert extract_program("```\nn = int(input())\nprint(n * n)\n```", preferred="cpp").language == "python"
    assert (
        extract_program("```\n#include <iostream>\nint main(){}\n```", preferred="python").language == "cpp"
    )
    # no hints either way: the problem's preferred language breaks the tie
    assert extract_program("```\nx\n```", preferred="python").language == "python"
    assert guess_language("x", "cpp") == "cpp"


def test_strip_reasoning():
    assert strip_reasoning("a<think>b</think>c<think>d</think>e") == "e"
    assert strip_reasoning("answer <think>unfinished") == "answer "
    assert strip_reasoning("plain") == "plain"


GARBAGE = {
    "control bytes": "\x00\x01\x02```cpp\x00",
    "lone surrogate": "\ud800 surrogate",
}
#: name -> (a piece, how many times it repeats in the large case, what closes it)
GROWING = {
    "many fences": ("```\n", 100_000, ""),
    "backtick run": ("`", 1_000_000, ""),
    "unclosed code tags": ("<code>", 100_000, "</code>"),
    "nested think": ("<think>", 400_000, "</think>" * 3),
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_never_raises(garbage):
    extract_program(garbage)


def _cpu_seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):  # the best of three: CPU time, yet other processes still disturb caches
        start = time.process_time()
        extract_program(text)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("piece,reps,tail", GROWING.values(), ids=GROWING.keys())
def test_garbage_cost_grows_linearly(piece, reps, tail):
    # 8x the input: a linear scan costs ~8x the CPU time, a backtracking (quadratic) one ~64x
    small, large = piece * (reps // 8) + tail, piece * reps + tail
    ratio = _cpu_seconds(large) / max(_cpu_seconds(small), 1e-4)
    assert ratio < 24, f"8x the input took {ratio:.1f}x the CPU time"


def test_code_tag_with_inline_fence():
    program = extract_program("<code>```python\nprint(1)\n```</code>", preferred="cpp")
    assert program.language == "python" and program.source == "print(1)\n"
