"""Planner inputs: --data-size in written profiles, imported n_train, flag ranges, strict JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import InputError
from remote.profile import load_profile
from remote.review.planner import plan_profile
from remote.runs_store import import_csv, list_runs
from tests.review.conftest import TINY
from tui.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


def _strict_json(text: str) -> dict:  # type: ignore[type-arg]
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    data: dict = json.loads(text, parse_constant=refuse)  # type: ignore[type-arg]
    return data


def test_written_profile_carries_the_data_size_and_replans_the_same(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "picked.yaml"
    args = ["plan", "local", "--data-size", "92GB", "--deadline", "2h", "--runs-dir", str(no_runs)]
    assert main([*args, "--write-profile", str(out), "--json"]) == 0
    planned = _strict_json(capsys.readouterr().out)
    written = load_profile(out)
    assert written.data.synthetic is not None and written.data.synthetic.size == 92_000_000_000
    assert main(["plan", str(out), "--runs-dir", str(no_runs), "--json"]) == 0
    again = _strict_json(capsys.readouterr().out)
    assert again["n_train"] == planned["n_train"]
    assert again["target"]["label"] == planned["pick"]["label"]
    assert again["target"]["seconds"] == pytest.approx(planned["pick"]["seconds"])
    assert again["target"]["usd"] == pytest.approx(planned["pick"]["usd"])


def test_written_profile_of_input_files_warns_that_the_size_is_not_kept(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "seed.yaml"
    args = ["plan", "aws-seed-g3", "--data-size", "92GB", "--runs-dir", str(no_runs)]
    assert main([*args, "--write-profile", str(out), "--json"]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "--data-size 92000000000" in err
    assert "# WARNING:" in out.read_text() and "--data-size 92000000000" in out.read_text()
    assert main(["profiles", str(out)]) == 0


def test_a_data_size_the_schema_refuses_names_the_flag(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "big.yaml"
    args = ["plan", "local", "--data-size", "2TB", "--write-profile", str(out)]
    assert main([*args, "--runs-dir", str(no_runs)]) == 2
    assert "--data-size 2000000000000" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("rate", ["-100", "-0.01", "nan", "inf", "1.5"])
def test_spot_interruptions_out_of_range_is_refused(
    rate: str, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "local", f"--spot-interruptions={rate}", "--runs-dir", str(no_runs)])
    assert exc.value.code == 2
    assert "--spot-interruptions" in capsys.readouterr().err


@pytest.mark.parametrize("rate", [-1.0, math.nan, 2.0])
def test_plan_profile_refuses_a_bad_spot_rate(rate: float) -> None:
    with pytest.raises(InputError, match="spot interruptions"):
        plan_profile(load_profile(TINY), [], spot_interruptions_h=rate)


def _g5_csv(tmp_path: Path, n_train: int, extra: str = "") -> Path:
    path = tmp_path / f"g5-{n_train}.csv"
    path.write_text(
        "run,instance_type,count,epochs,seconds,n_train,profile\n"
        f"r1,g5.xlarge,1,3,100,{n_train},aws-g5-2node\n" + extra
    )
    return path


def test_an_imported_rate_scales_by_the_rows_n_train(tmp_path: Path) -> None:
    profile = load_profile(ROOT / "profiles" / "aws-g5-2node.yaml")
    plans = {n: plan_profile(profile, import_csv(_g5_csv(tmp_path, n))) for n in (1000, 327_670)}
    assert plans[1000].n_train == 327_670 and not plans[1000].target.estimate
    small, same = plans[1000].target, plans[327_670].target
    assert same.epoch_s == pytest.approx(100 / 3 / 2)  # 2 GPUs, measured at this size
    assert small.epoch_s == pytest.approx(same.epoch_s * 327.67)  # seconds per sample


def test_imported_rows_without_the_profile_are_counted_on_stderr(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = _g5_csv(tmp_path, 327_670, "r2,g5.xlarge,1,3,50,327670,\n")
    args = ["plan", "aws-g5-2node", "--import", str(csv), "--runs-dir", str(no_runs), "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "1 of 2 row(s) skipped (line(s) 3)" in captured.err and "profile" in captured.err
    assert _strict_json(captured.out)["skipped_rows"]


def test_wall_time_includes_the_predicted_preprocessing(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run("np1", nproc=1, epoch_s=[2.0, 2.0], sync_s=0.1, fixed_s=10.0)
    runs = tmp_path / "runs"
    plan = plan_profile(load_profile(TINY), list_runs(runs), data_size=92_000_000_000)
    assert plan.target_wall_s is not None
    local = next(p for p in plan.prep if p.runner == "local")
    assert plan.wall_parts["preprocessing"] == pytest.approx(local.seconds) and local.seconds > 60
    assert plan.target_wall_s == pytest.approx(sum(plan.wall_parts.values()))
    assert main(["plan", str(TINY), "--data-size", "92GB", "--runs-dir", str(runs)]) == 0
    text = capsys.readouterr().out
    assert f"preprocessing {local.seconds:,.1f} s" in text.replace("\n", " ")


@pytest.mark.parametrize("top", ["0", "-1", "x"])
def test_top_below_one_is_refused(top: str, no_runs: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "local", f"--top={top}", "--runs-dir", str(no_runs)])
    assert exc.value.code == 2


@pytest.mark.parametrize("top", [1, 2, 5])
def test_top_shows_exactly_n_rows(
    top: int, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "aws-g5-2node", "--top", str(top), "--runs-dir", str(no_runs)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert len(rows) == top


def test_table_rows_keep_the_pinned_ones() -> None:
    from tui.cli.commands.plan import table_rows

    a, b, c, d = (object() for _ in range(4))
    assert table_rows([a, b, c], [c, None], 2) == [a, c]
    assert table_rows([a, b, c], [b, d], 3) == [a, b, d]
    assert table_rows([a, b], [a, a], 5) == [a, b]
    assert table_rows([a, b, c], [d, c], 1) == [d]


@pytest.mark.parametrize("flag", [["--deadline", "inf"], ["--budget", "inf"], ["--budget", "nan"]])
def test_non_finite_limits_are_refused(flag: list[str], no_runs: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", "local", *flag, "--json", "--runs-dir", str(no_runs)])
    assert exc.value.code == 2


def test_json_is_strict(no_runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "local", "--deadline", "2h", "--budget", "$5", "--data-size", "1GB"]
    assert main([*args, "--json", "--runs-dir", str(no_runs)]) == 0
    assert _strict_json(capsys.readouterr().out)["deadline_h"] == 2.0


@pytest.mark.parametrize("size", ["1B", "100KB"])
def test_a_corpus_too_small_to_plan_is_refused(
    size: str, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--data-size 1B` planned a 9 s run from one training sample, with a band as narrow as
    a real one; a corpus of fewer than MIN_PLAN_SAMPLES reviews is a usage error (exit 2)."""
    assert main(["plan", "local", "--data-size", size, "--runs-dir", str(no_runs)]) == 2
    err = capsys.readouterr().err
    assert "too few to plan" in err and "Traceback" not in err
    assert main(["plan", "local", "--data-size", "10MB", "--runs-dir", str(no_runs)]) == 0


def test_past_runs_of_an_ssh_profile_are_its_measurements(
    make_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its runs were classed 'CPU ?' and the profile 'ssh CPU': never matched, so the plan
    listed them and said 'no past run of this workload' in the same breath."""
    from remote.runs_store import load_run

    config = load_profile(ROOT / "profiles" / "ssh-loopback.yaml").resolved()
    for n, epochs in ((1, [20.0, 20.0]), (2, [11.0, 11.0])):
        folder = make_run(f"r{n}", nproc=n, epoch_s=epochs, sync_s=0.5,
                          profile=json.loads(json.dumps(config)),
                          summary_extra={"provider": "ssh"})  # fmt: skip
        assert load_run(folder).hardware == "ssh CPU"
    args = ["plan", str(ROOT / "profiles" / "ssh-loopback.yaml"), "--runs-dir"]
    assert main([*args, str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "ssh CPU: 2 run(s)" in out and "no past run of this workload" not in out
    assert "prediction error on past runs" in out
    assert "×None" not in out and "ssh-loopback (2 proc)" in out  # nodes have no type to name


def test_an_unmeasured_ssh_cluster_pays_for_its_network_and_widens_its_band(
    tmp_path: Path,
) -> None:
    """Two SSH nodes never run were predicted as one machine with both cores (linear scaling,
    no all-reduce) with the single-host band: the same hours and band as one rank with two
    threads, though its gradients cross a network every step."""
    one_node = tmp_path / "one.yaml"
    text = (ROOT / "profiles" / "ssh-loopback.yaml").read_text()
    head, _, tail = text.partition("  - name: node1")
    tail = tail[tail.index("data:") :].replace("  threads: 1 ", "  threads: 2 ")  # 2 cores too
    one_node.write_text(head + tail)
    cluster = plan_profile(load_profile(ROOT / "profiles" / "ssh-loopback.yaml"), [], epochs=5)
    single = plan_profile(load_profile(one_node), [], epochs=5)
    assert cluster.target.workers == 2 and single.target.workers == 1
    assert cluster.target.band > single.target.band  # the worker-count band added
    assert "ranks over the network: all-reduce" in cluster.target.basis
    assert "over the network" not in single.target.basis


@pytest.mark.parametrize("synthetic", [False, True])
def test_title_rows_grow_the_planned_training_set_of_real_reviews(
    tmp_path: Path, synthetic: bool
) -> None:
    """Titles as rows add 65 % training rows on real reviews (measured), none on synthetic ones
    (their few dozen titles): a plan that ignored them under-predicted hours and $."""
    from remote.review.datasize import TITLE_ROWS_FACTOR

    text = TINY.read_text()
    if not synthetic:
        reviews = tmp_path / "reviews.jsonl"
        reviews.write_text('{"reviewText": "fine", "overall": 5, "summary": "ok"}\n')
        synthetic_data = "  synthetic:\n    size: 10MB\n    seed: 3\n"
        text = text.replace(synthetic_data, f"  inputs: [{reviews}]\n")
    plain, titled = tmp_path / "plain.yaml", tmp_path / "titled.yaml"
    plain.write_text(text)
    titled.write_text(text.replace("preprocess:\n", "preprocess:\n  title_rows: true\n"))
    size = 92_000_000_000
    without = plan_profile(load_profile(plain), [], data_size=size)
    with_titles = plan_profile(load_profile(titled), [], data_size=size)
    assert without.n_train and with_titles.n_train
    ratio = with_titles.n_train / without.n_train
    said = " ".join(with_titles.inputs)
    if synthetic:
        assert ratio == 1.0 and "title_rows" not in said
    else:
        assert ratio == pytest.approx(TITLE_ROWS_FACTOR, rel=1e-6)
        assert f"× {TITLE_ROWS_FACTOR:.2f} for preprocess.title_rows" in said


def test_a_profiles_input_files_are_sized_for_the_plan(
    tmp_path: Path, no_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 3.6 MB input was planned as the old study's 19 M training samples (6.63 h), said only
    at the end of the output; the files are now counted, and the line sits under the headline."""
    import gzip

    data = tmp_path / "in"
    data.mkdir()
    line = json.dumps({"reviewText": "a sturdy stand that works well " * 3, "overall": 5}) + "\n"
    (data / "a.jsonl").write_text(line * 3_000)
    with gzip.open(data / "b.jsonl.gz", "wt") as fh:
        fh.write(line * 2_000)
    profile = tmp_path / "real.yaml"
    profile.write_text(f"name: real\nprovider: local\ndata:\n  inputs: [{data}]\n")
    assert main(["plan", str(profile), "--runs-dir", str(no_runs), "--json"]) == 0
    planned = _strict_json(capsys.readouterr().out)
    assert planned["n_train"] == 4_500  # 5,000 lines less the 10 % test split: an upper bound
    (local,) = planned["preprocessing"]
    assert local["scratch_bytes"] == 0 and local["seconds"] < 1
    assert main(["plan", str(profile), "--runs-dir", str(no_runs)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    head = out.split("Candidates for")[0]
    assert "training set: at most 4,500 samples from the 2 input file(s): 5,000 lines" in head


def test_large_inputs_are_sized_from_a_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip
    import random

    from remote.review import input_size

    words = ["good", "bad", "sturdy", "broke", "works", "fine", "cheap", "returned", "love", "hate"]
    pick = random.Random(0)

    def reviews(n: int) -> bytes:  # varied text: gzip compresses it evenly, as real reviews
        return b"".join(
            json.dumps({"reviewText": " ".join(pick.choices(words, k=12)), "overall": 4}).encode()
            + b"\n"
            for _ in range(n)
        )

    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        (tmp_path / name).write_bytes(reviews(10_000))
    with gzip.open(tmp_path / "d.jsonl.gz", "wb") as fh:
        fh.write(reviews(10_000))
    whole = input_size.measure_inputs([str(tmp_path)])
    assert whole is not None and (whole.lines, whole.exact) == (40_000, True)
    monkeypatch.setattr(input_size, "SAMPLE_BYTES", whole.bytes * 3 // 8)  # 1.5 files read
    monkeypatch.setattr(input_size, "BLOCK", 50_000)  # in blocks smaller than a file
    sampled = input_size.measure_inputs([str(tmp_path)])
    assert sampled is not None and not sampled.exact
    assert sampled.lines == pytest.approx(40_000, rel=0.05)
    assert sampled.bytes == pytest.approx(whole.bytes, rel=0.05)
    assert "estimated from their first" in sampled.describe()
    assert input_size.measure_inputs(["s3://bucket/reviews"]) is None  # not read from here
    assert input_size.measure_inputs([str(tmp_path / "missing.jsonl")]) is None
