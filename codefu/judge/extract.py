"""Take the program out of a model response.

Responses are long reasoning followed by code. The rules, in order:

1. Reasoning is dropped: everything up to the last `</think>`; an unclosed `<think>` (the model ran out
   of tokens while thinking) drops everything after it.
2. Candidates are fenced blocks (```` ```lang ```` on its own line, closed by a line of backticks) and
   `<code>...</code>` blocks (the CodeFu prompt format, with or without a fence inside). A fence left
   open at the end of the response was cut off by the token limit and is not a program.
3. The last candidate whose language is known wins: a supported fence tag (`cpp`, `c++`, `cc`, `cxx`,
   `python`, `py`, `python3`) or raw `<code>` content. Fences tagged with another language are ignored.
   Untagged fences are used only when nothing tagged exists (they are often sample output).
4. A candidate without a tag gets its language from its content (`#include` / `int main` mean C++,
   `def` / `input()` / `print(` mean Python), and the problem's preferred language breaks ties.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from codefu.types import Language

FENCE_TAGS: dict[str, Language] = {
    "cpp": "cpp",
    "c++": "cpp",
    "cc": "cpp",
    "cxx": "cpp",
    "python": "python",
    "python3": "python",
    "py": "python",
}

_CPP_HINT = re.compile(r"#\s*include|\bint\s+main\s*\(|\bstd::|\bcin\s*>>|\bcout\s*<<|\bprintf\s*\(")
_PY_HINT = re.compile(r"^\s*(def |import |from \w+ import )|\binput\(\)|\bprint\(|sys\.stdin", re.MULTILINE)


@dataclass(frozen=True)
class Program:
    language: Language
    source: str


def strip_reasoning(text: str) -> str:
    end = text.rfind("</think>")
    if end != -1:
        return text[end + len("</think>") :]
    start = text.find("<think>")
    return text[:start] if start != -1 else text


def guess_language(source: str, preferred: Language) -> Language:
    cpp = len(_CPP_HINT.findall(source))
    py = len(_PY_HINT.findall(source))
    if cpp != py:
        return "cpp" if cpp > py else "python"
    return preferred


def _fences(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, tag, body) of every closed fenced block. Line-based and linear in the text's size:
    model output is untrusted, and a backtracking regex over a run of backticks is quadratic."""
    blocks = []
    pos = 0
    opened: tuple[int, str, int] | None = None  # (start, tag, body start)
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("```"):
            if opened is None:
                tag = stripped[3:].split(maxsplit=1)[0].lower() if stripped[3:].strip() else ""
                opened = (pos, tag, pos + len(line))
            elif stripped.strip("`") == "":
                blocks.append((opened[0], pos + len(line), opened[1], text[opened[2] : pos]))
                opened = None
        pos += len(line)
    return blocks


def _code_tags(text: str) -> list[tuple[int, int, str]]:
    """(start, end, body) of every <code>...</code>, found with str.find (linear)."""
    lower = text.lower()
    tags = []
    pos = 0
    while (start := lower.find("<code>", pos)) != -1:
        end = lower.find("</code>", start)
        if end == -1:
            break
        tags.append((start, end + len("</code>"), text[start + len("<code>") : end]))
        pos = end + len("</code>")
    return tags


def extract_program(response: str, preferred: Language = "cpp") -> Program | None:
    """The program in `response`, or None when there is none (the NO_CODE verdict). Never raises."""
    text = strip_reasoning(response)
    tagged: list[tuple[int, Program]] = []
    untagged: list[tuple[int, str]] = []
    for start, _, tag, body in _fences(text):
        if not body.strip():
            continue
        if tag in FENCE_TAGS:
            tagged.append((start, Program(FENCE_TAGS[tag], body)))
        elif not tag:
            untagged.append((start, body))
    for start, _, body in _code_tags(text):
        inner = body.strip()
        tag = ""
        if inner.startswith("```"):  # a fence inside <code> that does not stand on its own lines
            first, _, inner = inner.partition("\n")
            tag = first.strip("` \t").lower()
            inner = inner.rstrip()
            inner = inner[:-3] if inner.endswith("```") else inner
        if inner.strip():
            language = FENCE_TAGS.get(tag) or guess_language(inner, preferred)
            tagged.append((start, Program(language, inner.strip("\n") + "\n")))
    if tagged:
        return max(tagged, key=lambda t: t[0])[1]
    if untagged:
        body = max(untagged, key=lambda t: t[0])[1]
        return Program(guess_language(body, preferred), body)
    return None
