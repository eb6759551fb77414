"""Prompt templates are data: YAML files in codefu/data/templates/ (or any path), rendered here.

A template has `name`, `language`, `description`, `chat_rendered` (true when the messages already carry a
model's chat markers, like CodeFu's) and `messages`: a list of {role, content}. In content, `{statement}`,
`{name}` and `{<variant slot>}` are replaced; every other brace is left alone. `variants` maps a slot to a
list of strings; a problem gets the one picked by a hash of (seed, problem name, slot), so the choice is
stable across runs and machines.

Function-call problems (`Problem.function`: LeetCode-style, the judge calls a function) are rendered from
`function_messages` instead, which may also use `{entry_point}` (the function's name) and
`{starter_code}` (the dataset's signature, or a line naming the function when it has none); a template
without them uses python.yaml's (Python: the only language with a function-call harness).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from codefu.errors import CodefuError

TEMPLATE_DIR = Path(__file__).parent / "templates"
_FIXED_SLOTS = ("statement", "name", "entry_point", "starter_code")


@dataclass(frozen=True)
class Template:
    name: str
    language: str
    description: str
    messages: tuple[tuple[str, str], ...]  # (role, content with {slots})
    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    chat_rendered: bool = False
    function_messages: tuple[tuple[str, str], ...] = ()  # for function-call problems; () = the default
    path: str = ""
    sha256: str = ""

    def render(self, statement: str, name: str, seed: int = 0) -> list[dict[str, str]]:
        return self._render(self.messages, {"statement": statement, "name": name}, seed)

    def render_function(
        self, statement: str, name: str, entry_point: str, starter_code: str, seed: int = 0
    ) -> list[dict[str, str]]:
        """The prompt of a function-call problem (`function_messages`, or the default)."""
        starter = starter_code.rstrip() or f"# a function named {entry_point}"
        values = {"statement": statement, "name": name, "entry_point": entry_point, "starter_code": starter}
        messages = self.function_messages or load_template("python").function_messages
        return self._render(messages, values, seed)

    def _render(
        self, messages: tuple[tuple[str, str], ...], values: dict[str, str], seed: int
    ) -> list[dict[str, str]]:
        name = values["name"]
        for slot, options in self.variants.items():
            digest = hashlib.blake2b(f"{seed}\0{name}\0{slot}".encode(), digest_size=8).digest()
            values[slot] = options[int.from_bytes(digest, "big") % len(options)]
        pattern = re.compile(r"\{(" + "|".join(map(re.escape, values)) + r")\}")
        # One pass: text coming from the statement is never scanned for slots again.
        return [
            {"role": role, "content": pattern.sub(lambda m: values[m.group(1)], text)}
            for role, text in messages
        ]


def available() -> list[str]:
    return sorted(p.stem for p in TEMPLATE_DIR.glob("*.yaml"))


def load_template(name_or_path: str) -> Template:
    """A template by name (a file in codefu/data/templates) or by path to a YAML file."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = TEMPLATE_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            raise CodefuError(
                f"unknown prompt template {name_or_path!r} (available: {', '.join(available())})"
            )
    raw = path.read_bytes()
    try:
        d = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise CodefuError(f"{path}: not valid YAML ({e})") from None
    return _build(d, path, hashlib.sha256(raw).hexdigest())


def _build(d: object, path: Path, sha: str) -> Template:
    if not isinstance(d, dict) or not isinstance(d.get("messages"), list) or not d["messages"]:
        raise CodefuError(f"{path}: a template needs a non-empty `messages` list")
    messages = _messages(d["messages"], path, "messages")
    function_messages = _messages(d.get("function_messages") or [], path, "function_messages")
    if function_messages and not any("{statement}" in text for _, text in function_messages):
        raise CodefuError(f"{path}: no function_messages entry contains {{statement}}")
    variants = {}
    for slot, options in (d.get("variants") or {}).items():
        if slot in _FIXED_SLOTS or not options or not all(isinstance(o, str) for o in options):
            raise CodefuError(f"{path}: variants.{slot} must be a non-empty list of strings")
        variants[slot] = tuple(options)
    if not any("{statement}" in text for _, text in messages):
        raise CodefuError(f"{path}: no message contains {{statement}}")
    language = d.get("language", "cpp")
    if language not in ("cpp", "python"):
        raise CodefuError(f"{path}: language must be cpp or python, not {language!r}")
    return Template(
        name=str(d.get("name") or path.stem),
        language=language,
        description=str(d.get("description", "")),
        messages=tuple(messages),
        variants=variants,
        chat_rendered=bool(d.get("chat_rendered", False)),
        function_messages=tuple(function_messages),
        path=str(path),
        sha256=sha,
    )


def _messages(raw: object, path: Path, key: str) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise CodefuError(f"{path}: {key} must be a list of {{role, content}}")
    messages = []
    for i, m in enumerate(raw):
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise CodefuError(f"{path}: {key}[{i}] must be {{role: str, content: str}}")
        messages.append((m["role"], m["content"]))
    return messages
