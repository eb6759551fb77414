"""Self-repair with the real judge and the real commands: the feedback of sandboxed runs on the public
tests (a canary hidden test never in it), `codefu eval --turns 2`, and `codefu train` with
rollout.turns=2 on a tiny model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codefu.judge import Judge, JudgeConfig
from codefu.models.tiny import save_tiny_model, tiny_tokenizer
from codefu.observability.sinks import read_metrics
from codefu.orchestrator.episodes import feedback_message
from codefu.orchestrator.scoring import JudgeScorer
from codefu.types import Problem, TestCase

CANARY = "CANARY-51c0de"
PUBLIC = [TestCase("2 3\n", "5\n"), TestCase("10 20\n", "30\n")]
HIDDEN = [TestCase(f"1 1\n#{CANARY}-input\n", f"2\n#{CANARY}-output\n")]
SUM = Problem("sum", "Print a + b.", PUBLIC, HIDDEN, preferred_language="python")


def program(source: str) -> str:
    return f"```python\n{source}\n```"


@pytest.fixture(scope="module")
def scorer():
    with Judge(JudgeConfig(workers=2)) as judge:
        yield JudgeScorer(judge, "codefu")


def test_the_feedback_shows_the_public_run_and_never_a_hidden_test(scorer):
    wrong = program("a, b = map(int, input().split())\nprint(a * b)")  # 2 3 -> 6
    crash = program("a, b = map(int, input().split())\nprint(a // 0)")
    fits_examples = program(
        "a, b = map(int, input().split())\nif a == 1:\n    print(3)\nelse:\n    print(a + b)"
    )
    broken = program("print(")
    fbs = scorer.check_public([SUM] * 4, [wrong, crash, fits_examples, broken])
    texts = [feedback_message(fb, 400) for fb in fbs]
    assert fbs[0].status == "WRONG_ANSWER" and (fbs[0].example, fbs[0].examples) == (1, 2)
    assert (
        "Input:\n```\n2 3\n```\nExpected output:\n```\n5\n```\nYour program's output:\n```\n6\n```"
        in texts[0]
    )
    assert fbs[1].status == "RUNTIME_ERROR" and "ZeroDivisionError" in texts[1]
    assert fbs[2].passed  # passes the examples: its episode ends here...
    assert not scorer.score([SUM], [fits_examples])[0].passed  # ...though the hidden test fails it
    assert fbs[3].status == "COMPILE_ERROR" and "SyntaxError" in texts[3]
    for fb, text in zip(fbs, texts, strict=True):
        assert CANARY not in text and CANARY not in repr(fb)


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    model = save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", max_position_embeddings=4096)
    tiny_tokenizer().save_pretrained(model)
    return model


def test_eval_reports_each_turn_and_repair_against_sampling(tmp_path, tiny_model_dir):
    out = tmp_path / "eval.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--model",
            str(tiny_model_dir),
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1",
            "--turns",
            "2",
            "--max-problems",
            "2",
            "--max-new-tokens",
            "8",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    turns = json.loads(out.read_text())["turns"]
    assert turns["turns"] == 2 and turns["problems"] == 2
    assert set(turns["pass@1_after_turn"]) == {"1", "2"}
    assert turns["sampling"]["samples"] == 2
    # a random tiny model writes no code: every episode takes both turns of at most 8 tokens, and sampling
    # draws both of the n=2 first turns (none passes the examples)
    assert 2 <= turns["self_repair"]["tokens"] <= 16 and 2 <= turns["sampling"]["tokens"] <= 16
    assert turns["pass@1_after_turn"]["2"]["pass@1"] == 0.0 and turns["diff"]["pass@1"] == 0.0
    assert "pass@1 after turn 2" in r.stdout and "repair - sampling" in r.stdout
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--model",
            str(tiny_model_dir),
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1",
            "--turns",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode != 0 and "--turns 3: must be between 1 and --n 2" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("async_turns", [False, True])
def test_codefu_train_runs_two_turn_episodes(tmp_path, tiny_model_dir, async_turns):
    run_dir = tmp_path / "run"
    overrides = [
        f"rollout.async_turns={str(async_turns).lower()}",
        f"trainer.model={tiny_model_dir}",
        "data.prompts_per_step=2",
        "rollout.n=2",
        "rollout.max_new_tokens=8",
        "rollout.turns=2",
        "rollout.max_episode_tokens=400",
        "algo.turn_cost=0.1",
        "loop.steps=2",
        "loop.val_every=2",
        "loop.val_n=2",
        "judge.max_tests=1",
        "data.max_prompt_tokens=4000",
    ]
    r = subprocess.run(
        [sys.executable, "-m", "codefu", "train", "--run-dir", str(run_dir), *overrides],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2]
    # the tiny model writes no code: every episode gets the feedback and a second turn
    assert all(row["rollout/turns_mean"] == 2.0 and "judge/pass_rate_turn2" in row for row in rows)
    assert all(row["reward/turn_shaping"] == pytest.approx(-0.1) for row in rows)
    assert "eval/turn2_pass@1" in rows[-1] and "eval/turn2_pass@1_ci_low" in rows[-1]
    if async_turns:  # judged as they went: generation to the last token, then the tail; no judge phase after
        assert all("timing/judge_tail_s" in row and "timing/judge_s" not in row for row in rows)
