"""`codefu eval`: pass@k per bucket with the real judge, its intervals, the paired comparison with a
baseline, evaluating a named subset; and the pure parts (bucket table, intervals, comparison, splits)."""

import json
import shutil
import subprocess
import sys

import pytest

from codefu.data.starter import load_starter_problems
from codefu.errors import CodefuError
from codefu.models import native_dtype_name
from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.orchestrator.eval_cli import (
    bucket_of,
    ci_by_bucket,
    compare,
    format_comparison,
    load_baseline,
    passk_by_bucket,
    select_problems,
    split_names,
)
from codefu.types import Problem

STARTER = [p.name for p in load_starter_problems()]  # names in the dataset's order


def test_passk_by_bucket_by_hand():
    # n=4: a problem solved 2/4 has pass@1 = 0.5, pass@4 = 1; one solved 0/4 has 0 and 0
    table = passk_by_bucket({"a": 2, "b": 0, "c": 4}, {"a": "easy", "b": "easy", "c": "hard"}, 4, [1, 4])
    assert table["easy"] == {"problems": 2, "pass@1": 0.25, "pass@4": 0.5}
    assert table["hard"] == {"problems": 1, "pass@1": 1.0, "pass@4": 1.0}
    assert table["all"]["problems"] == 3 and table["all"]["pass@1"] == pytest.approx(0.5)


def test_bucket_of():
    assert bucket_of(Problem("x", "", [], [], rating=800)) == "easy"
    assert bucket_of(Problem("x", "", [], [], rating=1500)) == "hard"
    assert bucket_of(Problem("x", "", [], [], rating=2600)) == "expert"
    assert bucket_of(Problem("x", "", [], [], extra={"bucket": "custom"})) == "custom"
    assert bucket_of(Problem("x", "", [], [])) == "all"


def test_ci_by_bucket_mirrors_the_bucket_table():
    correct, buckets = {"a": 2, "b": 0, "c": 4}, {"a": "easy", "b": "easy", "c": "hard"}
    ci = ci_by_bucket(correct, buckets, 4, [1, 4])
    table = passk_by_bucket(correct, buckets, 4, [1, 4])
    assert list(ci) == list(table) == ["all", "easy", "hard"]
    for b, row in ci.items():
        for k in ("pass@1", "pass@4"):
            low, high = row[k]
            assert low <= table[b][k] <= high
    assert ci["hard"] == {"pass@1": [1.0, 1.0], "pass@4": [1.0, 1.0]}  # one problem: no spread
    assert ci["easy"]["pass@1"] == [0.0, 0.5]  # problems at 0.5 and 0: means 0, 0.25, 0.5


def test_compare_and_its_line():
    a = {"x": 2, "y": 1, "z": 0, "only-a": 2}
    b = {"x": 1, "y": 1, "z": 0, "only-b": 0}
    c = compare(a, 2, b, 2, [1, 2])
    assert (c["problems"], c["only_a"], c["only_b"]) == (3, 1, 1)
    assert c["pass@1"]["diff"] == pytest.approx(0.5 / 3)
    assert (c["pass@1"]["better"], c["pass@1"]["worse"], c["pass@1"]["equal"]) == (1, 0, 2)
    assert c["pass@2"]["diff"] == pytest.approx(0.0) and c["pass@2"]["equal"] == 3
    low, high = c["pass@1"]["ci95"]
    assert low <= c["pass@1"]["diff"] <= high
    line = format_comparison(c, [1])[0]
    assert line.startswith("pass@1  A - B: +0.167 [") and line.endswith(
        "over 3 problems (A better on 1, worse on 0, equal on 2)"
    )
    with pytest.raises(CodefuError, match="B: pass@4 needs >= 4 samples"):
        compare(a, 4, b, 2, [4])
    with pytest.raises(CodefuError, match="no problem in common"):
        compare({"x": 1}, 2, {"y": 1}, 2, [1])


def test_split_files_and_selection(tmp_path):
    problems = [Problem(name, "", [], []) for name in ("a", "b", "c")]
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps(["c", "a"]))
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["b"], "heldout": ["c", "a"]}))
    assert split_names(str(listed), None) == ["c", "a"]
    assert split_names(str(split), "heldout") == ["c", "a"]
    assert [p.name for p in select_problems(problems, ["c", "a"], "x")] == ["a", "c"]  # the dataset's order
    with pytest.raises(
        CodefuError, match=r"holds the splits \['heldout', 'train'\]: choose one with --split"
    ):
        split_names(str(split), None)
    with pytest.raises(CodefuError, match="no split 'test'"):
        split_names(str(split), "test")
    with pytest.raises(CodefuError, match="one list of names"):
        split_names(str(listed), "heldout")
    with pytest.raises(CodefuError, match="missing.json"):
        split_names(str(tmp_path / "missing.json"), None)
    with pytest.raises(
        CodefuError, match=r"--problems: 1 of 2 problem names are not in the dataset, e.g. \['d'\]"
    ):
        select_problems(problems, ["a", "d"], "--problems")


def test_load_baseline_checks_the_file(tmp_path, capsys):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"model": "m", "dataset": "starter", "n": 2, "buckets": {}}))
    with pytest.raises(CodefuError, match="no per_problem and n"):
        load_baseline(str(old), "starter", {})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dataset": "starter", "n": 2, "per_problem": {"a": 3}}))
    with pytest.raises(CodefuError, match=r"outside 0..n=2 for \['a'\]"):
        load_baseline(str(bad), "starter", {})
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {"dataset": "other", "n": 2, "per_problem": {"a": 1}, "sampling": {"temperature": 0.7, "seed": 0}}
        )
    )
    assert load_baseline(str(good), "starter", {"temperature": 1.0, "seed": 0})["per_problem"] == {"a": 1}
    err = capsys.readouterr().err
    assert "evaluated on 'other', this on 'starter'" in err and "'temperature': (0.7, 1.0)" in err


def eval_cli(*args: str):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1,2",
            "--max-new-tokens",
            "8",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    model = tmp_path_factory.mktemp("tiny") / "model"
    tiny_model(seed=0).save_pretrained(model)
    tiny_tokenizer().save_pretrained(model)
    return model


def test_eval_cli_on_starter_problems(tmp_path, tiny_model_dir):
    model = tiny_model_dir
    out = tmp_path / "eval.json"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--model",
            str(model),
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1,2",
            "--max-problems",
            "3",
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
    result = json.loads(out.read_text())
    assert result["buckets"]["easy"]["problems"] == 3 and set(result["buckets"]["easy"]) == {
        "problems",
        "pass@1",
        "pass@2",
    }
    assert sum(result["verdicts"].values()) == 6  # every sample judged (a random tiny model: no code)
    assert "pass@1" in r.stdout and "easy" in r.stdout
    # added beside the old keys: accepted samples per problem, and the intervals of every bucket row
    per_problem = result["per_problem"]
    assert list(per_problem) == STARTER[:3]
    assert all(0 <= c <= 2 for c in per_problem.values())
    assert result["buckets"]["all"]["pass@1"] == pytest.approx(sum(per_problem.values()) / 6)
    assert set(result["ci95"]) == set(result["buckets"])
    for bucket, row in result["ci95"].items():
        assert set(row) == {"pass@1", "pass@2"}
        for k, (low, high) in row.items():
            assert low <= result["buckets"][bucket][k] <= high
    assert result["sampling"] == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_new_tokens": 8,
        "seed": 0,
        "dtype": native_dtype_name("cpu"),  # --dtype auto, not a run's model
    }
    assert "95% bootstrap interval over problems" in r.stdout
    assert "comparison" not in result
    # stderr is no terminal here: no bar, a line as each phase starts and ends
    label = f"(model {model})"
    phases = [line for line in r.stderr.splitlines() if label in line]
    assert phases[0] == f"generate {label}: 6 samples ..." and phases[2] == f"judge {label}: 6 programs ..."
    assert phases[1].startswith(f"generate {label}: done in ")
    assert phases[3].startswith(f"judge {label}: done in ")
    assert r.stdout.splitlines()[0].startswith(f"dtype {native_dtype_name('cpu')} (auto: ")


def test_eval_cli_in_the_rollout_dtype_of_a_runs_model(tmp_path, tiny_model_dir):
    run = tmp_path / "run"  # laid out as `codefu train` leaves it: config.yaml beside model/
    shutil.copytree(tiny_model_dir, run / "model")
    (run / "config.yaml").write_text("rollout:\n  n: 4\n  dtype: bfloat16\n")
    r = eval_cli("--model", str(run / "model"), "--max-problems", "1", "--n", "1", "--k", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"dtype bfloat16 (the rollout dtype of the model's run, {run / 'config.yaml'})" in r.stdout
    assert f"judge (model {run / 'model'}): 1 program ..." in r.stderr


def test_eval_cli_against_a_baseline_file_on_a_split(tmp_path, tiny_model_dir):
    names = STARTER[:4]
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": names[2:], "heldout": names[:2]}))
    baseline = tmp_path / "baseline.json"  # as an earlier --out: both held-out problems solved 2/2 and 1/2
    baseline.write_text(
        json.dumps(
            {
                "model": "earlier",
                "dataset": "starter",
                "n": 2,
                "per_problem": {names[0]: 2, names[1]: 1, names[2]: 0},
            }
        )
    )
    out = tmp_path / "eval.json"
    r = eval_cli(
        "--model",
        str(tiny_model_dir),
        "--split-file",
        str(split),
        "--split",
        "heldout",
        "--baseline",
        str(baseline),
        "--top-p",
        "0.9",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert list(result["per_problem"]) == names[:2] and result["buckets"]["all"]["problems"] == 2
    assert result["sampling"]["top_p"] == 0.9
    c = result["comparison"]
    assert (c["baseline"], c["baseline_model"], c["baseline_n"]) == (str(baseline), "earlier", 2)
    assert (c["problems"], c["only_a"], c["only_b"]) == (2, 0, 1)
    mine = [result["per_problem"][n] / 2 for n in names[:2]]
    assert c["pass@1"]["diff"] == pytest.approx((mine[0] - 1) / 2 + (mine[1] - 0.5) / 2)
    assert c["pass@1"]["b"] == pytest.approx(0.75)
    low, high = c["pass@1"]["ci95"]
    assert low <= c["pass@1"]["diff"] <= high
    assert "A - B: " in r.stdout and "over 2 problems (A better on" in r.stdout
    assert "1 in the baseline only" in r.stdout


def test_eval_cli_against_a_baseline_model(tmp_path, tiny_model_dir):
    # the same model as its own baseline, same seed and problems: the same samples, so A - B is exactly 0
    out = tmp_path / "eval.json"
    r = eval_cli(
        "--model",
        str(tiny_model_dir),
        "--problems",
        f"{STARTER[1]},{STARTER[4]}",
        "--baseline",
        str(tiny_model_dir),
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    c = result["comparison"]
    assert (c["problems"], c["only_a"], c["only_b"], c["baseline_n"]) == (2, 0, 0, 2)
    for k in ("pass@1", "pass@2"):
        assert c[k]["diff"] == 0.0 and c[k]["ci95"] == [0.0, 0.0] and c[k]["equal"] == 2
    assert c["baseline_result"]["per_problem"] == result["per_problem"]
    assert c["baseline_result"]["verdicts"] == result["verdicts"]
    assert "A - B: +0.000 [+0.000, +0.000] over 2 problems" in r.stdout


@pytest.mark.slow
def test_eval_cli_with_the_native_engine_and_top_k(tmp_path, tiny_model_dir):
    # the tiny model takes 512 positions; a starter prompt is ~900 characters = tokens here
    r = eval_cli("--model", str(tiny_model_dir), "--max-problems", "1", "--engine", "native")
    assert r.returncode == 2 and "(--engine native): prompt 0 has" in r.stderr and "Traceback" not in r.stderr
    model = tmp_path / "long"
    tiny_model(seed=0, max_position_embeddings=2048).save_pretrained(model)
    tiny_tokenizer().save_pretrained(model)
    # the same path as the loop's validation, over the other backend and with top-k: same problems, every
    # sample judged, the sampling recorded
    out = tmp_path / "native.json"
    r = eval_cli(
        "--model", str(model), "--max-problems", "2", "--engine", "native", "--top-k", "5", "--out", str(out)
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert list(result["per_problem"]) == STARTER[:2] and sum(result["verdicts"].values()) == 4
    assert result["sampling"]["top_k"] == 5
    bad = eval_cli("--model", str(tiny_model_dir), "--top-k", "-1")
    assert bad.returncode == 2 and "--top-k -1: must be >= 0" in bad.stderr
    # vLLM lives in .venv-vllm, not in this Python: a clear error naming the install, no traceback
    r = eval_cli("--model", str(model), "--max-problems", "1", "--engine", "vllm")
    assert r.returncode == 2 and "--engine vllm: " in r.stderr and "vLLM is not installed" in r.stderr
    assert "Traceback" not in r.stderr


def test_eval_rejects_unknown_problem_names(tmp_path):
    r = eval_cli("--model", "x", "--problems", f"{STARTER[1]},no-such-problem")
    assert r.returncode == 2 and "--problems: 1 of 2 problem names are not in the dataset" in r.stderr


def test_eval_rejects_bad_k(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu.cli",
            "eval",
            "--model",
            "x",
            "--dataset",
            "starter",
            "--n",
            "2",
            "--k",
            "1,4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "--k 1,4: must be comma-separated integers between 1 and --n 2" in r.stderr
