"""The accuracy yardstick for several pipeline variants × folds at once, in parallel processes.

Each variant is a set of KEY=VALUE overrides of the pipeline (``preprocess.*``, ``train.*``,
``model.*``; values are JSON where they parse). Every (variant, fold) pair is one task in its own
process (``--jobs`` at a time, one torch thread each; ``--device`` is the trainer's device, and a
finished run scores its test texts on it too), the TF-IDF + LR baseline (``--baseline``) one task
per fold. A fold's training texts are preprocessed once per distinct preprocess setting, before
the training tasks that read them. The longest tasks start first (IMDB's 50 k test reviews, the
baseline's slow folds). A task that raises or whose process dies is recorded with its error text
(and its log's tail) and the sweep goes on. Each finished task prints one JSON line to stderr and
the ``--json`` file is rewritten after every task, so a killed sweep keeps what finished. At the
end: one table row per variant (loco means, each fold's accuracy, IMDB, in-domain, negation
probes, Δ vs the baseline of this run or of ``--baseline-json`` — an earlier sweep's JSON or a
``bench_accuracy.py --json`` file). ``--seeds 0,1,2`` runs every variant once per ``train.seed``
and adds a NAME@mean row. Folds, datasets, runs and per-task logs go to ``--work`` (a temporary
folder by default); ``--task-timeout S`` kills a task that runs longer.

    python benchmarks/yardstick_sweep.py --jobs 16 --device cuda --json sweep.json \\
        --variant 'name=default' \\
        --variant 'name=stopwords preprocess.preset=stopwords' \\
        --variant 'name=narrow model.ngram_buckets=0' \\
        [--baseline | --baseline-json base.json] [--kinds loco,imdb,in_domain] [--only phones]
    python benchmarks/yardstick_sweep.py --table sweep.json [--baseline-json base.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this checkout's engine

from yardstick_child import run_child
from yardstick_significance import paired_table

SECTIONS = ("preprocess", "train", "model")
SLOW_BASELINE_FOLDS = ("instruments", "office")
"""Folds where the baseline's C grid converges slowly (C up to 256): started early."""
PREP_FIRST = 1e15
"""Added to a preprocessing task's cost: it starts before every other task (they wait on it),
the one feeding the longest training first."""


@dataclass
class Variant:
    """A named set of pipeline overrides."""

    name: str
    preprocess: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)

    def overrides(self) -> dict[str, dict[str, Any]]:
        """The overrides by section."""
        return {s: getattr(self, s) for s in SECTIONS}


def parse_variant(text: str, index: int) -> Variant:
    """``name=X section.key=value ...`` (shell quoting; values JSON where they parse)."""
    from yardstick_pipeline import parse_overrides

    variant = Variant(name=f"v{index}")
    for token in shlex.split(text):
        key, sep, raw = token.partition("=")
        if not sep:
            raise SystemExit(f"--variant {text!r}: {token!r} is not KEY=VALUE")
        if key == "name":
            variant.name = raw
            continue
        section, _, name = key.partition(".")
        if section not in SECTIONS or not name:
            raise SystemExit(f"--variant {text!r}: {key!r} must be one of {SECTIONS} + '.KEY'")
        getattr(variant, section).update(parse_overrides([f"{name}={raw}"]))
    return variant


def with_seeds(variants: list[Variant], seeds: list[int]) -> list[Variant]:
    """Each variant once per seed, named NAME@sSEED (the table adds their mean as NAME@mean)."""
    return [
        Variant(f"{v.name}@s{seed}", v.preprocess, {**v.train, "seed": seed}, v.model)
        for v in variants
        for seed in seeds
    ]


@dataclass
class Task:
    """One unit of work run in its own process."""

    key: str
    kind: str
    """prep (preprocess a fold), train (train + score a variant on a fold) or baseline."""
    spec: dict[str, Any]
    cost: float
    needs: str | None = None
    """Key of the prep task whose data folder this task reads."""
    variant: str | None = None
    fold: str = ""


# ---------------------------------------------------------------- the parent side


def star_ratings(text: str) -> set[int]:
    """A comma list of star ratings (argparse names this function in its error)."""
    return {int(r) for r in text.split(",") if r}


def _chars(path: Path) -> int:
    return path.stat().st_size


def write_folds(folds: list[Any], work: Path) -> dict[str, dict[str, Any]]:
    """Each fold's texts as JSON lines under WORK/folds/NAME; returns the fold facts."""
    facts = {}
    for fold in folds:
        folder = work / "folds" / fold.name
        folder.mkdir(parents=True, exist_ok=True)
        for part in ("train", "test"):
            texts = getattr(fold, part)
            with open(folder / f"{part}.jsonl", "w", encoding="utf-8") as fh:
                for t, y, r in zip(texts.texts, texts.labels, texts.ratings, strict=True):
                    fh.write(json.dumps({"text": t, "label": y, "rating": r}) + "\n")
        facts[fold.name] = {
            "kind": fold.kind,
            "n_train": len(fold.train),
            "n_test": len(fold.test),
            "test_positive_rate": round(fold.test.positive_rate, 4),
            "majority": round(fold.test.majority_rate, 4),
            "train_bytes": _chars(folder / "train.jsonl"),
            "test_bytes": _chars(folder / "test.jsonl"),
        }
    return facts


def _per_fold(value: Any, fold: str) -> Any:
    """A string override with ``{fold}`` names each fold's own file (e.g. embeddings built
    without the left-out category: ``model.init_embeddings=DIR/{fold}``)."""
    return value.replace("{fold}", fold) if isinstance(value, str) else value


def plan_tasks(
    variants: list[Variant], facts: dict[str, dict[str, Any]], work: Path, args: argparse.Namespace
) -> list[Task]:
    """Prep tasks (one per fold × distinct preprocess settings), train tasks, baseline tasks."""
    tasks: list[Task] = []
    preps: dict[str, Task] = {}
    for name, fact in facts.items():
        train_file, test_file = (work / "folds" / name / f"{p}.jsonl" for p in ("train", "test"))
        for v in variants:
            pre = {"workers": 1, **v.preprocess}
            digest = hashlib.sha1(json.dumps(pre, sort_keys=True).encode()).hexdigest()[:10]
            prep_key = f"prep/{name}/{digest}"
            prep_work = work / "prep" / name / digest
            train_cost = fact["train_bytes"] * float(v.train.get("epochs", 3)) + fact["test_bytes"]
            if prep_key not in preps:
                spec = {
                    "train": str(train_file),
                    "work": str(prep_work),
                    "preprocess": pre,
                    "reuse": args.reuse,
                }
                preps[prep_key] = Task(prep_key, "prep", spec, PREP_FIRST, fold=name)
            preps[prep_key].cost = max(preps[prep_key].cost, PREP_FIRST + train_cost)
            cache = str(work / "cache")  # the trainer's dataset copies, removed with WORK
            train = {"threads": 1, "device": args.device, "data_cache": cache, **v.train}
            spec = {
                "data": str(prep_work / "data"),
                "run": str(work / "runs" / v.name / name),
                "test": str(test_file),
                "train": train,
                "model": {k: _per_fold(value, name) for k, value in v.model.items()},
                "score_device": train["device"],
                "reuse": args.reuse,
                "refit": args.refit,
            }
            tasks.append(
                Task(f"{v.name}/{name}", "train", spec, train_cost, prep_key, v.name, name)
            )
        if args.baseline:
            slow = 2.0 if name in SLOW_BASELINE_FOLDS else 1.0
            cost = fact["train_bytes"] * 3 * slow + fact["test_bytes"]
            spec = {"train": str(train_file), "test": str(test_file)}
            tasks.append(Task(f"baseline/{name}", "baseline", spec, cost, None, None, name))
    return [*preps.values(), *tasks]


class Sweep:
    """Runs tasks in at most ``jobs`` child processes; records every outcome incrementally."""

    def __init__(
        self,
        tasks: list[Task],
        jobs: int,
        work: Path,
        doc: dict[str, Any],
        out: Path | None,
        task_timeout: float | None,
    ) -> None:
        self.pending = sorted(tasks, key=lambda t: -t.cost)
        self.jobs, self.work, self.doc, self.out = jobs, work, doc, out
        self.task_timeout = task_timeout
        self.done: dict[str, dict[str, Any]] = {}
        self.running: dict[Any, tuple[Task, Any, float]] = {}
        self.ctx = mp.get_context("spawn")  # no CUDA or thread state inherited from the parent
        (work / "logs").mkdir(parents=True, exist_ok=True)

    def _paths(self, task: Task) -> tuple[str, str]:
        stem = str(self.work / "logs" / task.key.replace("/", "__"))
        return f"{stem}.result.json", f"{stem}.log"

    def _next_ready(self) -> Task | None:
        for i, task in enumerate(self.pending):
            if task.needs is None or task.needs in self.done:
                return self.pending.pop(i)
        return None

    def _start(self, task: Task) -> None:
        if task.needs is not None and not self.done[task.needs]["ok"]:
            error = f"preprocessing failed: {self.done[task.needs]['error']}"
            self._record(task, {"ok": False, "error": error}, 0.0)
            return
        result, log = self._paths(task)
        proc = self.ctx.Process(target=run_child, args=(task.kind, task.spec, result, log))
        proc.start()
        self.running[proc.sentinel] = (task, proc, time.time())

    def _finish(self, proc: Any, task: Task, started: float, timed_out: bool = False) -> None:
        proc.join()
        result, log = self._paths(task)
        try:
            outcome = json.loads(Path(result).read_text())
        except (OSError, ValueError):
            why = "timed out" if timed_out else f"process ended with exit code {proc.exitcode}"
            tail = Path(log).read_text(errors="replace")[-2000:] if Path(log).exists() else ""
            outcome = {"ok": False, "error": f"{why} without a result", "log_tail": tail}
        self._record(task, outcome, time.time() - started)

    def _record(self, task: Task, outcome: dict[str, Any], seconds: float) -> None:
        self.done[task.key] = outcome
        line: dict[str, Any] = {"task": task.key, "ok": outcome["ok"], "s": round(seconds, 1)}
        if outcome["ok"]:
            res = outcome["result"]
            line.update({k: res[k] for k in ("accuracy", "f1", "auc") if k in res})
        else:
            line["error"] = outcome["error"]
        if task.kind != "prep":
            keep = ("error", "traceback", "log_tail")
            entry = (
                outcome["result"]
                if outcome["ok"]
                else {k: outcome[k] for k in keep if k in outcome}
            )
            entry["task_s"] = round(seconds, 1)
            if task.kind == "baseline":
                self.doc["baseline"][task.fold] = entry
            else:
                self.doc["variants"][task.variant]["results"][task.fold] = entry
        print(json.dumps(line), file=sys.stderr, flush=True)
        self.save()

    def save(self) -> None:
        """Rewrite the JSON file (atomically) with everything finished so far."""
        self.doc["wall_s"] = round(time.time() - self.doc["started_unix"])
        if self.out:
            tmp = self.out.with_name(self.out.name + ".tmp")
            tmp.write_text(json.dumps(self.doc, indent=1))
            os.replace(tmp, self.out)

    def run(self) -> None:
        """Until every task is done: start ready tasks, wait for one to end."""
        try:
            while self.pending or self.running:
                while len(self.running) < self.jobs and (task := self._next_ready()):
                    self._start(task)
                if not self.running:
                    continue
                for sentinel in wait(list(self.running), timeout=5.0):
                    task, proc, started = self.running.pop(sentinel)
                    self._finish(proc, task, started)
                if self.task_timeout:
                    for sentinel, (task, proc, started) in list(self.running.items()):
                        if time.time() - started > self.task_timeout:
                            proc.kill()
                            del self.running[sentinel]
                            self._finish(proc, task, started, timed_out=True)
        finally:
            for _, proc, _ in self.running.values():
                proc.kill()
                proc.join()
            self.save()


# ---------------------------------------------------------------- the table


def load_baseline(path: str) -> dict[str, dict[str, Any]]:
    """Baseline metrics by fold from a sweep JSON or a ``bench_accuracy.py --json`` file."""
    doc = json.loads(Path(path).read_text())
    if isinstance(doc.get("baseline"), dict):
        return {f: r for f, r in doc["baseline"].items() if "accuracy" in r}
    return {r["fold"]: r["baseline"] for r in doc.get("folds", []) if "baseline" in r}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _mean_of_all(values: list[Any]) -> float | None:
    return None if any(v is None for v in values) else _mean(values)


def _adapted(result: dict[str, Any]) -> float | None:
    """Accuracy after prior adaptation (None where it was not measured or was refused)."""
    value = (result.get("prior_adapted") or {}).get("accuracy")
    return None if value is None else float(value)


def _fmt(value: float | None, points: bool = False) -> str:
    if value is None:
        return "—"
    return f"{100 * value:+.2f}" if points else f"{value:.4f}"


def summary_rows(doc: dict[str, Any], base: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant (and the baseline): loco means, per-fold accuracy, Δ vs the baseline."""
    facts = doc["folds"]
    loco = [f for f, x in facts.items() if x["kind"] == "loco"]
    base = {f: r for f, r in base.items() if f in facts}  # an earlier run may have more folds
    named = [(name, v["results"]) for name, v in doc["variants"].items()]
    if base:
        named.append(("baseline", base))
    base = {f: r for f, r in base.items() if r.get("accuracy") is not None}
    rows = []
    for name, results in named:
        ok = {f: r for f, r in results.items() if r.get("accuracy") is not None}
        done = [f for f in loco if f in ok]
        row: dict[str, Any] = {"variant": name, "loco_folds": f"{len(done)}/{len(loco)}"}
        for key in ("accuracy", "f1", "auc"):
            values = [ok[f][key] for f in done if ok[f].get(key) is not None]
            row[f"loco_{key}"] = _mean(values) if len(values) == len(done) else None
        row["folds"] = {f: ok[f]["accuracy"] for f in facts if f in ok}
        row["errors"] = sorted(f for f, r in results.items() if "error" in r)
        for key, column in (("probes", "negation_probes"), ("heldout", "negation_probes_heldout")):
            probes = [r[column] for r in ok.values() if column in r]
            row[key] = (min(probes), _mean(probes), max(probes)) if probes else None
        both = [f for f in done if f in base]
        row["delta_loco"] = (
            _mean([ok[f]["accuracy"] - base[f]["accuracy"] for f in both]) if both else None
        )
        row["delta_folds"] = {f: ok[f]["accuracy"] - base[f]["accuracy"] for f in ok if f in base}
        adapted = [_adapted(ok[f]) for f in done]
        row["loco_adapted"] = None if None in adapted else _mean(adapted)  # type: ignore[arg-type]
        pairs = [
            (a, _adapted(base[f]) if f in base else None)
            for a, f in zip(adapted, done, strict=True)
        ]
        complete = pairs and all(a is not None and b is not None for a, b in pairs)
        row["delta_loco_adapted"] = (
            _mean([a - b for a, b in pairs]) if complete else None  # type: ignore[operator]
        )
        f1_gaps = [(ok[f]["f1"] - base[f]["f1"], f) for f in both if "f1" in base[f]]
        row["worst_f1"] = min(f1_gaps) if f1_gaps else None  # target: within 1 point on each
        row["at_or_below_majority"] = [f for f in ok if ok[f]["accuracy"] <= facts[f]["majority"]]
        train_s = [r["train_s"] for r in ok.values() if r.get("train_s") is not None]
        row["mean_train_s"] = _mean(train_s)
        rows.append(row)
    return rows + seed_means(rows)


def seed_means(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """NAME@mean rows: the means of the NAME@sSEED rows' figures (where every seed has one)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        name, at, seed = row["variant"].rpartition("@s")
        if at and seed.isdigit():
            groups.setdefault(name, []).append(row)
    means = []
    for name, group in groups.items():
        if len(group) < 2:
            continue
        avg = _mean_of_all
        mean: dict[str, Any] = {"variant": f"{name}@mean", "loco_folds": group[0]["loco_folds"]}
        keys = ("loco_accuracy", "loco_f1", "loco_auc", "delta_loco", "mean_train_s")
        for key in (*keys, "loco_adapted", "delta_loco_adapted"):
            mean[key] = avg([g[key] for g in group])
        for key in ("folds", "delta_folds"):
            common = set.intersection(*(set(g[key]) for g in group))
            mean[key] = {f: avg([g[key][f] for g in group]) for f in common}
        mean["errors"] = sorted({e for g in group for e in g["errors"]})
        for key in ("probes", "heldout"):
            probes = [g[key][1] for g in group if g[key]]
            mean[key] = (min(probes), _mean(probes), max(probes)) if probes else None
        mean["worst_f1"] = None  # per seed only
        mean["at_or_below_majority"] = sorted({f for g in group for f in g["at_or_below_majority"]})
        means.append(mean)
    return means


def table(doc: dict[str, Any], base: dict[str, dict[str, Any]]) -> str:
    """Markdown table: one row per variant, the baseline last."""
    facts = doc["folds"]
    loco = [f for f, x in facts.items() if x["kind"] == "loco"]
    other = [f for f, x in facts.items() if x["kind"] != "loco"]
    head = ["variant", "loco acc", "Δ loco", "loco F1", "loco AUC", "loco adapted", "Δ adapted"]
    head += [*loco, *other]
    head += [f"Δ {f}" for f in other] + ["worst ΔF1 loco", "≤ majority", "probes min/mean/max"]
    head += ["held-out probes"]
    head += ["train s", "errors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in summary_rows(doc, base):
        probes = row["probes"]
        cells = [
            row["variant"] + (f" ({row['loco_folds']})" if loco else ""),
            _fmt(row["loco_accuracy"]),
            _fmt(row["delta_loco"], points=True),
            _fmt(row["loco_f1"]),
            _fmt(row["loco_auc"]),
            _fmt(row["loco_adapted"]),
            _fmt(row["delta_loco_adapted"], points=True),
            *[_fmt(row["folds"].get(f)) for f in loco + other],
            *[_fmt(row["delta_folds"].get(f), points=True) for f in other],
            f"{100 * worst[0]:+.2f} {worst[1]}" if (worst := row["worst_f1"]) else "—",
            ", ".join(row["at_or_below_majority"]) or "none",
            "/".join(f"{p:.2f}" for p in probes) if probes else "—",
            "/".join(f"{p:.2f}" for p in held) if (held := row["heldout"]) else "—",
            f"{row['mean_train_s']:.0f}" if row["mean_train_s"] is not None else "—",
            ", ".join(row["errors"]) or "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    majority = [_fmt(facts[f]["majority"]) for f in loco + other]
    loco_major = _mean([facts[f]["majority"] for f in loco])
    cells = ["majority", _fmt(loco_major), "", "", "", "", "", *majority]
    cells += [""] * (len(other) + 5)
    lines.append("| " + " | ".join(cells) + " |")
    for name, variant in doc["variants"].items():
        in_order = {f: variant["results"][f] for f in facts if f in variant["results"]}
        paired = paired_table(in_order, base, loco)
        if paired:
            lines += ["", f"{name} vs the baseline, paired on the same texts:", "", paired]
    return "\n".join(lines)


# ---------------------------------------------------------------- main


def main() -> None:
    from yardstick_data import CATEGORIES

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variant", action="append", default=[], metavar="'name=N KEY=VALUE ...'")
    parser.add_argument("--baseline", action="store_true", help="also run the baseline per fold")
    parser.add_argument("--baseline-json", help="baseline figures of an earlier run (for Δ)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--data-dir", default="/work/shared/data")
    parser.add_argument("--kinds", default="loco,imdb,in_domain")
    parser.add_argument("--categories", default=",".join(CATEGORIES))
    parser.add_argument("--only", default="", help="only these loco folds (comma list)")
    parser.add_argument(
        "--titles",
        action="store_true",
        help="the training reviews' titles are training rows too, for every variant and the "
        "baseline (test texts unchanged; with --reuse use a --work of its own)",
    )
    parser.add_argument(
        "--drop-train-ratings",
        type=star_ratings,
        default=set(),
        metavar="R[,R]",
        help="leave training texts of these ratings out of every fold (e.g. 3: train on 1-2 vs "
        "4-5 stars; the test texts keep them; with --reuse use a --work of its own)",
    )
    parser.add_argument(
        "--seeds", help="run every variant with each of these train.seed values (comma list)"
    )
    parser.add_argument("--json", help="results file, rewritten after every task")
    parser.add_argument("--work", help="keep folds, datasets, runs and logs here (default: temp)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the datasets and finished runs already under --work: only score them again",
    )
    parser.add_argument(
        "--refit",
        action="store_true",
        help="with --reuse: fit each finished run's blend and companion again with this code "
        "(engine.sentiment.after_training.refit_saved_run) before scoring it",
    )
    parser.add_argument("--task-timeout", type=float, help="kill a task after this many seconds")
    parser.add_argument("--table", metavar="JSON", help="only print the table of a sweep JSON")
    args = parser.parse_args()
    base = load_baseline(args.baseline_json) if args.baseline_json else {}
    if args.table:
        doc = json.loads(Path(args.table).read_text())
        print(table(doc, base or doc.get("baseline", {})))
        return
    variants = [parse_variant(text, i + 1) for i, text in enumerate(args.variant)]
    if args.seeds:
        variants = with_seeds(variants, [int(x) for x in args.seeds.split(",")])
    if len({v.name for v in variants}) != len(variants):
        raise SystemExit("--variant names must differ")
    if not variants and not args.baseline:
        raise SystemExit("nothing to run: give --variant ... and/or --baseline")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # one thread per task (children inherit this)
    with tempfile.TemporaryDirectory(prefix="yardstick-sweep-") as tmp:
        work = Path(args.work or tmp)
        run_sweep(args, variants, base, work)


def run_sweep(
    args: argparse.Namespace, variants: list[Variant], base: dict[str, Any], work: Path
) -> None:
    """Load the folds, run every task, print the table."""
    from yardstick_data import make_folds, without_ratings

    start = time.time()
    names = args.categories.split(",")
    only = [n for n in args.only.split(",") if n]
    folds = make_folds(Path(args.data_dir), names, args.kinds.split(","), only, args.titles)
    if not folds:
        raise SystemExit(f"no fold matches --kinds {args.kinds} --only {args.only}")
    dropped: set[int] = args.drop_train_ratings
    if dropped:
        folds = [replace(f, train=without_ratings(f.train, dropped)) for f in folds]
    facts = write_folds(folds, work)
    del folds
    print(f"folds ready in {time.time() - start:.0f} s: {', '.join(facts)}", file=sys.stderr)
    doc: dict[str, Any] = {
        "command": " ".join(shlex.quote(a) for a in sys.argv),
        "started_unix": start,
        "jobs": args.jobs,
        "device": args.device,
        "titles": args.titles,
        "drop_train_ratings": sorted(dropped),
        "folds": facts,
        "variants": {v.name: {"overrides": v.overrides(), "results": {}} for v in variants},
        "baseline": {},
        "baseline_json": args.baseline_json,
    }
    tasks = plan_tasks(variants, facts, work, args)
    out = Path(args.json) if args.json else None
    sweep = Sweep(tasks, args.jobs, work, doc, out, args.task_timeout)
    sweep.run()
    doc["load_avg_1m"] = os.getloadavg()[0]
    sweep.save()
    print(table(doc, base or doc["baseline"]))


if __name__ == "__main__":
    main()
