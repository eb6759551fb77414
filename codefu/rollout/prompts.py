"""Problems to prompt token ids: the model's chat template, except for prompts already rendered as ChatML."""

from __future__ import annotations

from typing import Any

from codefu.errors import CodefuError
from codefu.types import Problem

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
_LANGUAGE_NAMES = {"python": ("Python 3", "python"), "cpp": ("C++17", "cpp")}


# One worked example as a prior turn: on trivial problems it took SmolLM2-135M from 0-1 to 1-5 solved of
# 16 samples (shared/design/measurements.md), and groups where every sample fails teach GRPO nothing.
# The example is written like the starter statements (Markdown sections): on 16 ladder problems x 8 at
# temperature 0.6 that solved 8 of 128 vs 3 with a one-line example (docs/LOG.md, 2026-12-01).
_EXAMPLE = {
    "python": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
    "cpp": "```cpp\n#include <iostream>\nint main() {\n    long long a, b;\n    std::cin >> a >> b;\n"
    "    std::cout << a + b << std::endl;\n}\n```",
}
_EXAMPLE_PROBLEM = """# Sum of Two

You are given two integers a and b. Print their sum.

## Input

A single line with two integers a and b.

## Output

Print one integer: a + b.

## Examples

### Example 1

Input:

```
2 3
```

Output:

```
5
```
"""


def default_messages(problem: Problem) -> list[dict[str, str]]:
    """A system message asking for one program in a ```python / ```cpp block, one worked example, then the
    statement."""
    name, tag = _LANGUAGE_NAMES[problem.preferred_language]
    system = (
        f"You are an expert competitive programmer. Solve the problem in {name}. Reply with one complete "
        f"program that reads standard input and writes standard output, in a single ```{tag} code block."
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": _EXAMPLE_PROBLEM},
        {"role": "assistant", "content": _EXAMPLE[problem.preferred_language]},
        {"role": "user", "content": problem.statement},
    ]


def is_prerendered(messages: list[dict[str, str]]) -> bool:
    """True for CodeFu's published rows: ONE user message whose content is already the whole ChatML text,
    from "<|im_start|>..." to the generation prompt "<|im_start|>assistant\\n"."""
    if len(messages) != 1 or messages[0].get("role") != "user":
        return False
    content = messages[0].get("content", "")
    return content.lstrip().startswith(IM_START) and content.rstrip("\n").endswith(f"{IM_START}assistant")


def parse_chatml(text: str) -> list[dict[str, str]]:
    """ChatML text -> messages; the trailing empty assistant turn (the generation prompt) is dropped."""
    messages = []
    for segment in text.split(IM_START)[1:]:
        role, _, content = segment.partition("\n")
        content = content.rstrip("\n").removesuffix(IM_END).rstrip("\n")
        messages.append({"role": role.strip(), "content": content})
    if messages and messages[-1]["role"] == "assistant" and not messages[-1]["content"]:
        messages.pop()
    return messages


def _knows_chatml(tokenizer: Any) -> bool:
    ids = tokenizer.encode(IM_START, add_special_tokens=False)
    return len(ids) == 1 and ids[0] != tokenizer.unk_token_id


def encode_prompt(tokenizer: Any, problem: Problem) -> list[int]:
    """Prompt token ids for `problem`, ending with the generation prompt (the assistant turn's header).

    - problem.prompt pre-rendered as ChatML (CodeFu's data): tokenized as is, no template, no BOS, when the
      tokenizer has <|im_start|> as one token; otherwise parsed back into messages and templated.
    - other problem.prompt: the tokenizer's chat template with add_generation_prompt=True.
    - no prompt: `default_messages(problem)` through the chat template.
    """
    messages = problem.prompt or default_messages(problem)
    if is_prerendered(messages):
        content = messages[0]["content"]
        if _knows_chatml(tokenizer):
            return list(tokenizer.encode(content, add_special_tokens=False))
        messages = parse_chatml(content)
    if not getattr(tokenizer, "chat_template", None):
        raise CodefuError(
            f"problem {problem.name!r}: the tokenizer has no chat template; use an instruct model's "
            "tokenizer or give the tokenizer a chat_template"
        )
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


# Stands in for a reply while a template renders the turns after it (it must come out unchanged).
_REPLY = "CODEFU-REPLY-3f9a"


def follow_up_ids(tokenizer: Any, content: str, reply_ids: list[int]) -> list[int]:
    """The token ids that follow the model's reply `reply_ids` to add a user turn holding `content` and
    the next generation prompt, as the chat template renders them after an assistant turn; in ChatML:

        <|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n

    A reply that ended on the template's end-of-turn token (finish "stop" where that token is the EOS, as
    SmolLM2's <|im_end|>) already holds it, so it is not repeated; a reply cut by the length cap gets it.
    Without a chat template, a tokenizer that knows ChatML (CodeFu's pre-rendered rows) gets ChatML.
    """
    if getattr(tokenizer, "chat_template", None):
        messages = [
            {"role": "user", "content": "-"},
            {"role": "assistant", "content": _REPLY},
            {"role": "user", "content": content},
        ]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        if text.count(_REPLY) != 1:
            raise CodefuError(
                "the chat template does not render an assistant reply as written: no feedback "
                "turn can follow one (rollout.turns > 1 needs that)"
            )
        suffix = text.split(_REPLY, 1)[1]
    elif _knows_chatml(tokenizer):
        suffix = f"{IM_END}\n{IM_START}user\n{content}{IM_END}\n{IM_START}assistant\n"
    else:
        raise CodefuError("the tokenizer has no chat template: no feedback turn can follow a reply")
    ids = list(tokenizer.encode(suffix, add_special_tokens=False))
    if reply_ids and ids and reply_ids[-1] == ids[0]:
        ids = ids[1:]
    return ids
