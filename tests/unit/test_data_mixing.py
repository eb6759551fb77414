"""Mixing several training datasets: the config's list form, the weighted draws (exact shares, determinism,
resume, one dataset = today's loader, epochs per dataset, running out), the split per dataset and the
per-source metrics."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codefu.config import dump_yaml, load_config
from codefu.data.difficulty import DifficultyConfig, PassRateRecord
from codefu.data.loader import MixedLoader, ProblemLoader, training_loader
from codefu.data.mixing import DATASET_KEY, TrainSource, check_train, describe_train, plan_draws
from codefu.data.schema import SCHEMA, problem_to_row
from codefu.errors import CodefuError
from codefu.observability.metrics import source_metrics
from codefu.orchestrator.cli import load_splits
from codefu.orchestrator.config import DataConfig, RunConfig, check_run_config
from codefu.orchestrator.scoring import Score
from codefu.types import Problem
from codefu.types import TestCase as Case


def _problems(prefix: str, n: int, source: str = "") -> list[Problem]:
    return [Problem(f"{prefix}{i}", "s", [], [Case("1\n", "1\n")], source=source) for i in range(n)]


def _names(batch: list[Problem]) -> list[str]:
    return [p.name for p in batch]


def _write(path: Path, problems: list[Problem]) -> Path:
    rows = [problem_to_row(p, "train", i, "easy", p.name) for i, p in enumerate(problems)]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    return path


# ---- the plan: which dataset each prompt comes from ------------------------------------------------------


def test_plan_keeps_every_dataset_within_one_prompt_of_its_share():
    rng = random.Random(0)
    for _ in range(100):
        weights = [rng.choice([rng.uniform(0.05, 10), rng.randint(1, 5)]) for _ in range(rng.randint(1, 5))]
        drawn = [0] * len(weights)
        for _ in range(100):
            for i in plan_draws(weights, drawn, rng.randint(1, 9), [True] * len(weights)):
                drawn[i] += 1
            total = sum(drawn)
            assert all(abs(d - total * w / sum(weights)) < 1 for d, w in zip(drawn, weights, strict=True))


def test_plan_by_hand():
    # 2:1 with 3 per step: exactly 2 and 1 every step, in the order a, a, b (ties to the first listed)
    assert plan_draws([2, 1], [0, 0], 3, [True, True]) == [0, 1, 0]
    # 2:1 with 8 per step: 5 + 3, then 6 + 2 (16 drawn: 10.67 and 5.33), never drifting
    drawn = [0, 0]
    per_step = []
    for _ in range(3):
        plan = plan_draws([2, 1], drawn, 8, [True, True])
        per_step.append((plan.count(0), plan.count(1)))
        drawn = [drawn[0] + plan.count(0), drawn[1] + plan.count(1)]
    assert per_step == [(5, 3), (6, 2), (5, 3)] and drawn == [16, 8]
    # a closed dataset gets nothing; the open ones share by their weights; none open: nothing
    assert plan_draws([1, 5, 1], [0, 0, 0], 4, [True, False, True]) == [0, 2, 0, 2]
    assert plan_draws([1, 1], [3, 0], 2, [False, False]) == [] and plan_draws([1], [0], 0, [True]) == []
    # counts so far matter: a dataset behind its share catches up first
    assert plan_draws([1, 1], [0, 4], 4, [True, True]) == [0, 0, 0, 0]


# ---- the loader ---------------------------------------------------------------------------------------


def test_mixed_loader_draws_by_weight_deterministically():
    def draws() -> list[str]:
        loader = MixedLoader([_problems("a", 30), _problems("b", 7), _problems("c", 50)], [3, 1, 4], seed=2)
        return [n for _ in range(40) for n in _names(loader.next_batch(8))]

    seen = draws()
    assert seen == draws()
    counts = {k: sum(n.startswith(k) for n in seen) for k in "abc"}
    assert counts == {"a": 120, "b": 40, "c": 160}  # 320 prompts at 3:1:4, exact at a multiple of 8


def test_one_dataset_is_the_plain_loader():
    problems = _problems("p", 13)
    plain = ProblemLoader(problems, seed=4)
    mixed = MixedLoader([problems], [2.5], seed=4)
    for n in (5, 8, 3, 13, 1):
        assert _names(mixed.next_batch(n)) == _names(plain.next_batch(n))
    assert isinstance(training_loader(problems, "x.parquet", 4), ProblemLoader)


def test_each_dataset_keeps_its_own_order_and_epochs():
    small, big = _problems("s", 4), _problems("b", 40)
    mixed = MixedLoader([small, big], [1, 1], seed=7)
    batches = [mixed.next_batch(6) for _ in range(4)]  # 12 from each: the small set three times over
    alone = ProblemLoader(small, seed=7)
    assert [n for b in batches for n in _names(b) if n.startswith("s")] == _names(alone.next_batch(12))
    assert [loader.epoch for loader in mixed.loaders] == [3, 0]
    assert all(len(b) == 6 for b in batches)


def test_a_dataset_that_runs_out_leaves_the_others_its_share():
    mixed = MixedLoader([_problems("s", 3), _problems("b", 9)], [1, 1], seed=0, epochs=1)
    first = mixed.next_batch(8)  # 3 from s (all it has), the rest from b
    assert sorted(n[0] for n in _names(first)) == ["b"] * 5 + ["s"] * 3
    assert mixed.exhausted == [True, False]
    assert _names(mixed.next_batch(8)) and len(mixed.next_batch(8)) == 0  # b's last 4, then nothing
    assert sum(mixed.drawn) == 12


def test_resume_draws_what_the_uninterrupted_run_draws():
    cfg = DifficultyConfig(enabled=True, window=1, retry_after=1)

    def make() -> MixedLoader:
        return MixedLoader(
            [_problems("a", 5, "x"), _problems("b", 11, "y")], [1, 2], seed=3, difficulty=PassRateRecord(cfg)
        )

    def run(loader: MixedLoader, steps: int) -> list[str]:
        out = []
        for _ in range(steps):
            batch = loader.next_batch(4)
            # a0..a2 and b0 always fail: set aside for a while; the rest pass half of the time
            loader.record({p.name: (0, 4) if p.name in ("a0", "a1", "a2", "b0") else (2, 4) for p in batch})
            out += _names(batch)
        return out

    reference = make()
    expected = run(reference, 15)
    assert expected.count("a0") < expected.count("a3")  # the shared record made a0 sit out
    assert reference.difficulty_metrics()["data/problems_too_hard"] >= 1
    first = make()
    seen = run(first, 6)
    state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint file
    assert "difficulty" in state and all("difficulty" not in d["loader"] for d in state["datasets"])
    resumed = make()
    resumed.load_state_dict(state)
    assert run(resumed, 9) == expected[len(seen) :]


def test_resume_checks_the_datasets_and_restarts_the_shares_with_new_weights():
    loader = MixedLoader([_problems("a", 5), _problems("b", 5)], [1, 1])
    loader.next_batch(6)
    state = loader.state_dict()
    with pytest.raises(CodefuError, match="saved state is for 2 datasets; data.train lists 1"):
        MixedLoader([_problems("a", 5)], [1]).load_state_dict(state)
    with pytest.raises(
        CodefuError, match=r"data.train\[1\]: ProblemLoader: the saved state is for a different"
    ):
        MixedLoader([_problems("a", 5), _problems("c", 5)], [1, 1]).load_state_dict(state)
    with pytest.raises(CodefuError, match="a single dataset's"):
        MixedLoader([_problems("a", 5)], [1]).load_state_dict(ProblemLoader(_problems("a", 5)).state_dict())
    same = MixedLoader([_problems("a", 5), _problems("b", 5)], [1, 1])
    same.load_state_dict(state)
    assert same.drawn == [3, 3]
    reweighted = MixedLoader([_problems("a", 5), _problems("b", 5)], [3, 1])
    reweighted.load_state_dict(state)
    assert reweighted.drawn == [0, 0]  # 3:1 from here on, not catching up on the past 1:1
    assert [loader.position for loader in reweighted.loaders] == [3, 3]
    assert [n[0] for n in _names(reweighted.next_batch(4))].count("a") == 3


def test_training_loader_groups_problems_by_their_dataset():
    a, b = _problems("a", 3), _problems("b", 2)
    for i, ps in enumerate((a, b)):
        for p in ps:
            p.extra[DATASET_KEY] = i
    train = [TrainSource("a.parquet", 1), TrainSource("b.parquet", 1)]
    loader = training_loader(b + a, train, seed=1)
    assert isinstance(loader, MixedLoader) and [len(x) for x in loader.loaders] == [3, 2]
    with pytest.raises(CodefuError, match=r"data.train\[1\] \(c.parquet\): no training problem left"):
        training_loader(a, [TrainSource("a.parquet"), TrainSource("c.parquet")])
    with pytest.raises(CodefuError, match="problem 'x0' names no dataset of data.train"):
        training_loader(_problems("x", 1), train)


# ---- the config ---------------------------------------------------------------------------------------


def test_config_takes_a_path_or_a_weighted_list(tmp_path):
    (tmp_path / "run.yaml").write_text(
        "data:\n  train:\n    - {path: data/taco/train.parquet, weight: 2}\n    - {path: data/cc/train.parquet}\n"
    )
    cfg = load_config(RunConfig, tmp_path / "run.yaml")
    assert cfg.data.train == [
        TrainSource("data/taco/train.parquet", 2.0),
        TrainSource("data/cc/train.parquet"),
    ]
    check_run_config(cfg)
    (tmp_path / "saved.yaml").write_text(dump_yaml(cfg))  # config.yaml of a run, loaded on --resume
    assert load_config(RunConfig, tmp_path / "saved.yaml").data.train == cfg.data.train
    assert describe_train(cfg.data.train) == "data/taco/train.parquet (x2), data/cc/train.parquet (x1)"
    assert load_config(RunConfig, None, ["data.train=data/x.parquet"]).data.train == "data/x.parquet"
    assert load_config(RunConfig).data.train == "starter"


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "[{path: a, weight: 1}, {path: b, weight: 0}]",
            r"data.train\[1\].weight must be a finite number > 0, got 0",
        ),
        ("[{path: a, weight: -1}]", r"data.train\[0\].weight must be a finite number > 0, got -1"),
        ("[{path: a, weight: .nan}]", r"data.train\[0\].weight must be a number, got nan"),  # by type
        ("[{path: a, weight: .inf}]", r"data.train\[0\].weight must be a finite number > 0"),
        ("[{path: a, weight: two}]", r"data.train\[0\].weight must be a number, got 'two'"),
        ("[{path: a, weight: true}]", r"data.train\[0\].weight must be a number, got True"),
        ("[{weight: 1}]", r"data.train\[0\].path is required"),
        ("[{path: '', weight: 1}]", r"data.train\[0\].path must be a non-empty string"),
        ("[{path: a, wieght: 1}]", r"unknown key data.train\[0\].wieght"),
        ("[a.parquet]", r"data.train\[0\] must be a mapping"),
        ("3", r"data.train must be a string or a list \({path: a string, weight: a number} each\)"),
    ],
)
def test_bad_entries_are_refused_naming_the_key(value, message):
    with pytest.raises(CodefuError, match=message):
        load_config(RunConfig, None, [f"data.train={value}"])


def test_an_empty_list_and_weights_set_in_code_are_checked():
    with pytest.raises(CodefuError, match=r"^data.train must be a non-empty list"):
        check_run_config(load_config(RunConfig, None, ["data.train=[]"]))
    cfg = RunConfig(data=DataConfig(train=[TrainSource("a"), TrainSource("b")]))
    cfg.data.train[1].weight = math.nan  # type: ignore[index, union-attr]
    with pytest.raises(CodefuError, match=r"^data.train\[1\].weight must be a finite number > 0, got nan"):
        check_run_config(cfg)
    with pytest.raises(ValueError, match="weight must be"):
        TrainSource("a", 0)
    check_train("starter")


# ---- loading the datasets -----------------------------------------------------------------------------


def test_each_dataset_is_split_and_marked(tmp_path):
    a = _write(tmp_path / "a.parquet", _problems("a", 10, "taco"))
    b = _write(tmp_path / "b.parquet", _problems("b", 20, "code_contests"))
    mixed = RunConfig(
        data=DataConfig(train=[TrainSource(str(a), 2), TrainSource(str(b))], val_fraction=0.2, seed=5)
    )
    train, val = load_splits(mixed)
    assert (len(train), len(val)) == (8 + 16, 2 + 4)  # val_fraction of each dataset
    assert {p.extra[DATASET_KEY] for p in train if p.source == "taco"} == {0}
    assert {p.extra[DATASET_KEY] for p in train if p.source == "code_contests"} == {1}
    # each dataset's split is the one it gets alone (fixed by data.seed)
    alone_train, alone_val = load_splits(RunConfig(data=DataConfig(train=str(b), val_fraction=0.2, seed=5)))
    assert _names([p for p in val if p.source == "code_contests"]) == _names(alone_val)
    assert _names([p for p in train if p.source == "code_contests"]) == _names(alone_train)
    assert load_splits(mixed)[1] and _names(load_splits(mixed)[1]) == _names(val)
    loader = training_loader(train, mixed.data.train, seed=5)
    batch = loader.next_batch(6)
    assert [p.source for p in batch].count("taco") == 4
    # data.val given: every dataset trains whole, the held-out problems are data.val's
    with_val = RunConfig(data=DataConfig(train=[TrainSource(str(a)), TrainSource(str(b))], val=str(a)))
    train, val = load_splits(with_val)
    assert (len(train), len(val)) == (30, 10)
    # "starter" may be one of the datasets: its recorded held-out problems stay held out
    train, val = load_splits(RunConfig(data=DataConfig(train=[TrainSource("starter"), TrainSource(str(a))])))
    assert {p.source for p in val} == {"starter", "taco"} and {p.extra[DATASET_KEY] for p in train} == {0, 1}


def test_missing_and_empty_datasets_name_the_key_and_path(tmp_path):
    a = _write(tmp_path / "a.parquet", _problems("a", 10))
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), empty)
    missing = tmp_path / "nope" / "b.parquet"

    def splits(*paths: Path, **kw) -> None:
        load_splits(RunConfig(data=DataConfig(train=[TrainSource(str(p)) for p in paths], **kw)))

    with pytest.raises(CodefuError, match=rf"^data.train\[1\].path: {missing}: no such file"):
        splits(a, missing)
    with pytest.raises(CodefuError, match=rf"^data.train\[1\].path: {empty} holds no problems"):
        splits(a, empty)
    with pytest.raises(CodefuError, match=rf"^data.val: {missing}: no such file"):
        splits(a, val=str(missing))
    with pytest.raises(CodefuError, match=rf"^data.train: {missing}: no such file"):
        load_splits(RunConfig(data=DataConfig(train=str(missing))))
    one = _write(tmp_path / "one.parquet", _problems("o", 1))
    train, val = load_splits(RunConfig(data=DataConfig(train=[TrainSource(str(one))], val_fraction=0.99)))
    assert (len(train), len(val)) == (1, 0)  # a share of a dataset is held out, never all of it


# ---- metrics ------------------------------------------------------------------------------------------


def test_source_metrics_per_step():
    taco, cc, bare = _problems("t", 2, "taco"), _problems("c", 1, "code contests"), _problems("u", 1)
    owners = [taco[0]] * 2 + [taco[1]] * 2 + [cc[0]] * 3 + [bare[0]]
    statuses = [
        "ACCEPTED",
        "WRONG_ANSWER",
        "ACCEPTED",
        "SANDBOX_ERROR",
        "SANDBOX_ERROR",
        "ACCEPTED",
        "TIME_LIMIT",
        "SANDBOX_ERROR",
    ]
    scores = [
        Score(None if s == "SANDBOX_ERROR" else float(s == "ACCEPTED"), s == "ACCEPTED", s) for s in statuses
    ]
    m = source_metrics(owners, scores)
    assert list(m) == [
        "data/pass_rate/code_contests",
        "data/prompts/code_contests",
        "data/pass_rate/taco",
        "data/prompts/taco",
        "data/pass_rate/unknown",
        "data/prompts/unknown",
    ]
    assert m["data/pass_rate/taco"] == pytest.approx(2 / 3) and m["data/prompts/taco"] == 2.0
    assert m["data/pass_rate/code_contests"] == 0.5 and m["data/prompts/code_contests"] == 1.0
    assert math.isnan(m["data/pass_rate/unknown"]) and m["data/prompts/unknown"] == 1.0  # nothing judged
    assert source_metrics([], []) == {}
    with pytest.raises(ValueError, match="1 problems but 0 scores"):
        source_metrics(owners[:1], [])
