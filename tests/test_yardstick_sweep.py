"""benchmarks/yardstick_sweep.py on two tiny fake categories: variants × folds in parallel
processes, the baseline as its own tasks, a failing variant recorded without stopping the sweep."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "benchmarks" / "yardstick_sweep.py"
FILES = {
    "instruments": "amazon2014_Musical_Instruments_5.jsonl.gz",
    "phones": "amazon2014_Cell_Phones_and_Accessories_5.head4776.jsonl.gz",
}
GOOD = ["great", "love", "perfect", "works", "excellent"]
BAD = ["broken", "waste", "returned", "awful", "junk"]


def _category(path: Path, seed: int, n: int = 160) -> None:
    rng = random.Random(seed)
    filler = [f"w{seed}x{i}" for i in range(40)] + ["the", "it", "and", "very"]
    lines = []
    for i in range(n):
        positive = rng.random() < 0.6
        words = rng.choices(filler, k=8) + rng.choices(GOOD if positive else BAD, k=2)
        rng.shuffle(words)
        text = " ".join([*words, f"id{seed}n{i}"])
        lines.append(json.dumps({"reviewText": text, "overall": 5.0 if positive else 1.0}))
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


@pytest.mark.slow
def test_sweep_runs_variants_and_baseline_and_records_a_failure(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for seed, name in enumerate(FILES.values()):
        _category(data / name, seed)
    out = tmp_path / "sweep.json"
    tiny = "train.epochs=4 train.batch_size=16 train.lr=0.02 train.warmup_steps=1"
    tiny += " train.lr_schedule=constant"
    args = [sys.executable, str(SWEEP), "--data-dir", str(data), "--categories"]
    args += [",".join(FILES), "--kinds", "loco,in_domain", "--jobs", "2", "--device", "cpu"]
    args += ["--variant", f"name=small {tiny} model.hidden=8 preprocess.preset=stopwords"]
    args += ["--variant", f"name=wide {tiny} model.hidden=8 model.ngram_buckets=64"]
    args += ["--variant", f"name=broken {tiny} model.hidden=0"]
    args += ["--baseline", "--json", str(out), "--work", str(tmp_path / "work")]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=480)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    folds = ["instruments", "phones", "in_domain"]
    assert list(doc["folds"]) == folds
    for name in ("small", "wide"):
        results = doc["variants"][name]["results"]
        assert sorted(results) == sorted(folds)
        for fold in folds:
            assert 0.5 < results[fold]["accuracy"] <= 1.0, (name, fold, results[fold])
            assert 0 <= results[fold]["negation_probes"] <= 1
        assert results["in_domain"]["auc"] > 0.6  # trained, not a constant
    for fold in folds:
        assert "hidden" in doc["variants"]["broken"]["results"][fold]["error"]
        assert doc["baseline"][fold]["accuracy"] > 0.5
    # both preprocess settings were prepared once per fold (the wide and broken variants share one)
    assert len(list((tmp_path / "work" / "prep" / "instruments").iterdir())) == 2
    # one stderr line per task as it finished: 2 preprocess settings x 3 folds, 9 runs, 3 baselines
    finished = [json.loads(x) for x in proc.stderr.splitlines() if x.startswith("{")]
    assert len(finished) == 2 * 3 + 3 * 3 + 3
    table = proc.stdout
    for name in ("small (2/2)", "wide (2/2)", "broken (0/2)", "baseline (2/2)", "majority"):
        assert f"| {name} |" in table
    # each variant against the baseline on the same texts, with intervals, the loco mean too
    assert "small vs the baseline, paired on the same texts:" in table
    assert "| **loco mean (2)** |" in table and "broken vs the baseline" not in table
    # the table can be printed again from the file, Δ against the baseline it holds
    again = subprocess.run(
        [sys.executable, str(SWEEP), "--table", str(out)], capture_output=True, text=True
    )
    assert again.returncode == 0 and again.stdout.strip() == table.strip()


def test_table_means_seeds_and_measures_against_the_baseline() -> None:
    sys.path.insert(0, str(SWEEP.parent))
    from yardstick_sweep import parse_variant, summary_rows, table, with_seeds

    v = with_seeds([parse_variant("name=w model.ngram_buckets=8 train.epochs=4", 1)], [0, 1])
    assert [x.name for x in v] == ["w@s0", "w@s1"]
    assert v[1].train == {"epochs": 4, "seed": 1} and v[1].model == {"ngram_buckets": 8}
    facts = {
        "a": {"kind": "loco", "majority": 0.6},
        "b": {"kind": "loco", "majority": 0.9},
        "imdb": {"kind": "imdb", "majority": 0.5},
    }

    def res(acc: float, f1: float) -> dict[str, float]:
        return {"accuracy": acc, "f1": f1, "auc": 0.9, "negation_probes": 0.7, "train_s": 10}

    doc = {
        "folds": facts,
        "variants": {
            "w@s0": {
                "results": {"a": res(0.80, 0.85), "b": res(0.90, 0.93), "imdb": res(0.7, 0.7)}
            },
            "w@s1": {
                "results": {"a": res(0.84, 0.87), "b": res(0.92, 0.95), "imdb": res(0.8, 0.8)}
            },
            "bad": {"results": {"a": {"error": "boom"}, "b": res(0.5, 0.5)}},
        },
    }
    base = {"a": res(0.82, 0.88), "b": res(0.91, 0.94), "imdb": res(0.75, 0.75)}
    for result, adapted in ((doc["variants"]["w@s0"]["results"]["a"], 0.86), (base["a"], 0.84)):
        result["prior_adapted"] = {"accuracy": adapted}  # type: ignore[assignment]
    doc["variants"]["w@s0"]["results"]["b"]["prior_adapted"] = {"accuracy": 0.92}  # type: ignore[assignment]
    base["b"]["prior_adapted"] = {"error": "refused"}  # type: ignore[assignment]
    base["not_run_here"] = res(0.5, 0.5)  # a baseline file of a wider run
    rows = {r["variant"]: r for r in summary_rows(doc, base)}
    assert rows["w@s0"]["loco_accuracy"] == pytest.approx(0.85)
    assert rows["w@s0"]["delta_loco"] == pytest.approx(-0.015)
    assert rows["w@s0"]["worst_f1"] == (pytest.approx(-0.03), "a")
    assert rows["w@mean"]["loco_accuracy"] == pytest.approx(0.865)
    assert rows["w@mean"]["delta_folds"]["imdb"] == pytest.approx(0.0)
    assert rows["bad"]["loco_folds"] == "1/2" and rows["bad"]["errors"] == ["a"]
    assert rows["bad"]["at_or_below_majority"] == ["b"]
    assert rows["baseline"]["delta_loco"] == 0
    assert rows["w@s0"]["loco_adapted"] == pytest.approx(0.89)
    assert rows["w@s0"]["delta_loco_adapted"] is None  # the baseline's b was refused
    base["b"]["prior_adapted"] = {"accuracy": 0.90}  # type: ignore[assignment]
    rows = {r["variant"]: r for r in summary_rows(doc, base)}
    assert rows["w@s0"]["delta_loco_adapted"] == pytest.approx(0.02)  # (0.02 + 0.02) / 2
    assert rows["w@s1"]["loco_adapted"] is None and rows["w@mean"]["loco_adapted"] is None
    text = table(doc, base)
    assert "| w@mean (2/2) | 0.8650 | +0.00 |" in text
    assert "| majority | 0.7500 |" in text


def test_a_fold_placeholder_gives_each_fold_its_own_file(tmp_path: Path) -> None:
    sys.path.insert(0, str(SWEEP.parent))
    import argparse

    from yardstick_sweep import parse_variant, plan_tasks

    v = parse_variant("name=e model.init_embeddings=/emb/{fold} model.hidden=8", 0)
    facts = {name: {"train_bytes": 10, "test_bytes": 1} for name in ("phones", "office")}
    args = argparse.Namespace(reuse=False, device="cpu", baseline=False, refit=False)
    tasks = [t for t in plan_tasks([v], facts, tmp_path, args) if t.kind == "train"]
    got = {t.fold: t.spec["model"] for t in tasks}
    assert got == {
        "phones": {"init_embeddings": "/emb/phones", "hidden": 8},
        "office": {"init_embeddings": "/emb/office", "hidden": 8},
    }
    assert v.model["init_embeddings"] == "/emb/{fold}"  # the variant itself is unchanged
