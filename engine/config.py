"""Plain, torch-free configuration dataclasses for every engine job (validated on creation)."""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from engine.errors import ConfigError

C = TypeVar("C")

Runner = Literal["local", "inline", "spark", "hadoop", "emr"]
InputFormat = Literal["auto", "mcauley", "jsonl"]
PreprocessPreset = Literal["default", "stopwords", "seed"]
OWN_TEXT_SVD = "svd"
"""ModelConfig.init_embeddings value: vectors from the training split's own text, not a folder."""
NO_INIT = "none"
"""ModelConfig.init_embeddings value: a random table, whatever the preset's."""
MAX_SEQ_LEN = 65_536
"""Longest token sequence a dataset row may hold (a review of ~400 KB of text; an LSTM over
more steps than that is a typo, and each row's padding would cost its full length on disk)."""


def _check(condition: bool, field_name: str, allowed: str, value: object) -> None:
    if not condition:
        raise ConfigError(f"{field_name} = {value!r} is not allowed; expected {allowed}")


@dataclass(kw_only=True, slots=True)
class PreprocessConfig:
    """Settings of the preprocessing job (raw reviews → dataset.h5)."""

    inputs: list[str]
    """Input files (plain or .gz), local paths or s3:// URIs on EMR."""
    output: str
    """Output folder; receives dataset.h5, vocab.json and stats.json."""
    runner: Runner = "local"
    """Where the MapReduce steps run: local (all cores), inline, spark, hadoop or emr."""
    workers: int | None = None
    """Worker processes for the local runner; None = all cores."""
    vocab_size: int = 30_000
    """Number of most frequent training words given ids (ids 2..vocab_size+1)."""
    seq_len: int = 256
    """Tokens per sequence after padding/truncation."""
    test_fraction: float = 0.1
    """Fraction of distinct texts put in the test split (by a hash of the text)."""
    format: InputFormat = "auto"
    """Input record format: auto-detect, McAuley 2014/2018, or generic JSON lines."""
    text_field: str | None = None
    """Field holding the review text for generic JSON lines (default reviewText)."""
    rating_field: str | None = None
    """Field holding the 1-5 rating for generic JSON lines (default overall)."""
    label_field: str | None = None
    """Field holding a 0/1 label (1 = positive) instead of a star rating, e.g. `label`; files
    whose records hold only `text` and `label` are recognised without it."""
    append_summary: bool = False
    """Append the `summary` field to the review text."""
    title_rows: bool = False
    """Each review's title (McAuley `summary`, Fine Food `Summary`) is also a training row of
    its own with the review's rating: short labelled texts such as "not bad at all" or "no
    complaints". Only titles of training reviews, never in the test split (BENCHMARKS.md,
    "Review titles as training rows")."""
    preset: PreprocessPreset = "default"
    """Text rules: `default` removes no word ("but", "too", "very", "only", "not" all carry
    sentiment; measured best on the yardstick, BENCHMARKS.md); `stopwords` drops NLTK's English
    stopwords but keeps negations (not/no/nor/n't forms: the default before 2026-11-24); `seed`
    is the seed system's exact rules (NLTK's list plus product/would/get, negations dropped)."""
    keep_negations: bool | None = None
    """Override the preset's choice to keep not/no/nor/n't forms (None = the preset's)."""
    max_line_bytes: int = 1 << 20
    """Lines longer than this are skipped as too_long."""
    memory_budget: int | None = None
    """Resident bytes the local runner's workers may use together: past its share a worker
    spills its distinct texts to the output's scratch folder; None = half the available memory."""
    max_skipped_share: float = 0.2
    """Warn when more than this share of the lines read is skipped (bad JSON, no rating, ...)."""
    min_class_share: float = 0.05
    """Warn when the rarer class holds less than this share of the usable reviews (none at all
    is an error: a classifier needs both classes)."""

    def __post_init__(self) -> None:
        _check(bool(self.inputs), "inputs", "at least one input path", self.inputs)
        _check(self.vocab_size >= 1, "vocab_size", "an integer >= 1", self.vocab_size)
        _check(
            1 <= self.seq_len <= MAX_SEQ_LEN, "seq_len", f"1 <= N <= {MAX_SEQ_LEN:,}", self.seq_len
        )
        _check(0.0 <= self.test_fraction < 1.0, "test_fraction", "0 <= F < 1", self.test_fraction)
        _check(self.workers is None or self.workers >= 1, "workers", ">= 1", self.workers)
        _check(self.max_line_bytes >= 1, "max_line_bytes", "bytes >= 1", self.max_line_bytes)
        _check(
            self.memory_budget is None or self.memory_budget > 0,
            "memory_budget",
            "a positive size in bytes",
            self.memory_budget,
        )
        _check(
            0.0 <= self.max_skipped_share <= 1.0,
            "max_skipped_share",
            "0 <= S <= 1",
            self.max_skipped_share,
        )
        _check(
            0.0 <= self.min_class_share < 0.5,
            "min_class_share",
            "0 <= S < 0.5",
            self.min_class_share,
        )
        _check(
            self.runner in ("local", "inline", "spark", "hadoop", "emr"),
            "runner",
            "local|inline|spark|hadoop|emr",
            self.runner,
        )
        _check(
            self.format in ("auto", "mcauley", "jsonl"), "format", "auto|mcauley|jsonl", self.format
        )
        _check(
            self.preset in ("default", "stopwords", "seed"),
            "preset",
            "default|stopwords|seed",
            self.preset,
        )

    @property
    def negations_kept(self) -> bool:
        """Whether negations survive stopword removal (the override, else the preset's rule)."""
        if self.keep_negations is not None:
            return self.keep_negations
        return self.preset != "seed"

    @property
    def stopwords_kept(self) -> bool:
        """Whether the stopwords other than negations survive (the `default` preset)."""
        return self.preset == "default"


@dataclass(kw_only=True, slots=True)
class BalanceConfig:
    """Dynamic load balancer settings (per-rank data shares and batch sizes)."""

    enabled: bool = False
    """Re-split shares and batch sizes by measured speed."""
    every_epochs: int = 1
    """Rebalance after every X epochs."""
    every_steps: int = 0
    """Also rebalance every K steps inside an epoch (0 = never)."""
    measure: Literal["fwd_bwd", "forward"] = "fwd_bwd"
    """What to time: forward+backward (default) or forward only (the old system)."""
    smoothing: float = 0.5
    """Exponential smoothing factor of measured seconds per sample (weight of the newest)."""
    hysteresis: float = 0.02
    """Do not move shares when every share would change by less than this fraction of itself."""
    min_share: float = 0.05
    """No rank gets less than this fraction of the data."""
    straggle: dict[int, float] = field(default_factory=dict)
    """Injected slowness for tests/benchmarks: rank -> factor (sleep (factor-1) x compute)."""
    emulate_s: float = 0.0
    """Emulated device time for tests/benchmarks: every rank sleeps this many seconds per
    sample after its backward, counted as compute — an accelerator whose work does not compete
    for the host's cores. A straggler then sleeps (factor-1) x the emulated time only, so speed
    ratios hold on a loaded machine."""

    def __post_init__(self) -> None:
        _check(self.every_epochs >= 1, "balance.every_epochs", ">= 1", self.every_epochs)
        _check(self.emulate_s >= 0, "balance.emulate_s", ">= 0", self.emulate_s)
        _check(self.every_steps >= 0, "balance.every_steps", ">= 0", self.every_steps)
        _check(0 < self.smoothing <= 1, "balance.smoothing", "0 < s <= 1", self.smoothing)
        _check(0 <= self.hysteresis < 1, "balance.hysteresis", "0 <= h < 1", self.hysteresis)
        _check(0 < self.min_share < 1, "balance.min_share", "0 < m < 1", self.min_share)
        for rank, factor in self.straggle.items():
            _check(
                rank >= 0 and factor >= 1, "balance.straggle", "RANK>=0:FACTOR>=1", (rank, factor)
            )


@dataclass(kw_only=True, slots=True)
class ModelConfig:
    """LSTM classifier shape."""

    preset: Literal["default", "seed"] = "default"
    """`seed` reproduces the old model (emb 100, 2-layer LSTM hidden 32, two FC layers)."""
    embedding_dim: int | None = None
    """Override the preset's embedding size."""
    hidden: int | None = None
    """Override the preset's LSTM hidden size."""
    layers: int | None = None
    """Override the preset's LSTM layer count."""
    bidirectional: bool | None = None
    """Override the preset's bidirectionality."""
    dropout: float | None = None
    """Override the preset's dropout."""
    embed_dropout: float | None = None
    """Override the preset's dropout on the embedded tokens."""
    ngram_buckets: int | None = None
    """Wide path beside the LSTM: hash buckets of a linear bag of unigrams and hashed bigrams
    whose score is added to the logit (0 = off; None = the preset's: 1,000,000 in `default`,
    off in `seed`)."""
    ngram_scale: float | None = None
    """Multiplier of the wide path's score, i.e. its learning rate relative to the LSTM's under
    Adam (None = the preset's: 10 in `default`, else 1.0)."""
    negation_scope: int | None = None
    """Words after a negation (not, no, never, n't forms; a clause word such as `but` ends it
    early) whose wide-path unigrams and bigrams count as negated features, "not_bad" apart from
    "bad" (0 = off; None = the preset's: 3 in `default`, with its wide path). Needs the wide
    path."""
    lexicon_prior: bool | None = None
    """The wide path also reads each text's sentiment-lexicon valence, flipped inside a negation
    scope (engine/sentiment/lexicon.py; None = the preset's: on in `default`, with its wide
    path). Needs the wide path."""
    lexicon_tokens: bool | None = None
    """The LSTM also reads each token's lexicon valence and whether it sits in a negation scope
    (three numbers beside its embedding; None = the preset's). Needs the lexicon prior."""
    companion: bool | None = None
    """After training, fit a logistic regression over the training rows' word and word-pair ids
    (NB-weighted, negations marked as in the wide path) and blend it with the network on the
    validation split; kept only where it lowers the validation log-loss
    (engine/sentiment/companion.py; None = the preset's: on in `default`). Needs the blend
    (a wide path, train.blend_paths, no pos_weight)."""
    init_embeddings: str | None = None
    """Folder of a finished `sentitop embed` run: its vectors initialise the embedding table,
    aligned by word (words it lacks start random; embedding_dim follows the run's). Or `svd`:
    vectors from the training split's own text (the truncated SVD of its PPMI matrix, computed
    by rank 0 at training start, seconds; engine/sentiment/own_text.py), or `none`: a random
    table. None = the preset's (`svd` in default, random in seed). A folder named svd or none
    is written ./svd or ./none."""

    def __post_init__(self) -> None:
        for name in ("embedding_dim", "hidden", "layers"):
            value = getattr(self, name)
            _check(value is None or value >= 1, f"model.{name}", ">= 1", value)
        for name in ("ngram_buckets", "negation_scope"):
            value = getattr(self, name)
            _check(value is None or value >= 0, f"model.{name}", ">= 0 (0 = off)", value)
        for name in ("dropout", "embed_dropout"):
            value = getattr(self, name)
            _check(value is None or 0 <= value < 1, f"model.{name}", "0 <= p < 1", value)
        scale = self.ngram_scale
        _check(scale is None or 0 < scale < math.inf, "model.ngram_scale", "a number > 0", scale)


@dataclass(kw_only=True, slots=True)
class TrainConfig:
    """Settings of a training run (read by every rank)."""

    data_dir: str
    """Folder holding dataset.h5 and vocab.json (from preprocessing)."""
    run_dir: str
    """Run folder: events.jsonl, checkpoints, summary.json."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Model shape."""
    epochs: int = 3
    """Number of epochs."""
    batch_size: int = 256
    """Global batch size (sum over ranks); per-rank batches split it."""
    lr: float = 8e-3
    """Learning rate at the reference batch size (scaled linearly with the global batch)."""
    lr_reference_batch: int = 256
    """Global batch at which `lr` applies (Goyal et al. linear scaling rule)."""
    warmup_steps: int = 100
    """Linear LR warm-up steps."""
    lr_schedule: Literal["constant", "cosine", "linear"] = "cosine"
    """LR after the warm-up: constant, or cosine/linear decay to 0 at the last step."""
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    """Optimizer (adamw: Adam with decoupled weight decay)."""
    weight_decay: float = 0.0
    """Weight decay of the optimizer (decoupled for adamw)."""
    clip_grad_norm: float = 1.0
    """Gradient clipping max norm (0 = off)."""
    pos_weight: float | Literal["auto", "none"] = "none"
    """BCE positive-class weight: auto = negatives/positives of the training set (a
    class-balanced loss; it moves the decision threshold and cost 1.5-2 points of accuracy on
    the Amazon files, see BENCHMARKS.md), none = unweighted, or a number."""
    eval_every: int = 1
    """Evaluate on the test split every N epochs (and always after the last)."""
    keep_best: bool = True
    """Finish with the weights of the evaluated epoch with the highest held-out accuracy (ties:
    lower loss); model.pt and the summary's metrics are that epoch's (`best_epoch`)."""
    blend_paths: bool = True
    """With a wide path and an unweighted loss: after training, fit the deep and wide paths'
    weights and a bias on the validation split (logistic regression of 3 numbers), kept when
    it lowers the validation log-loss (engine/sentiment/blend.py; BENCHMARKS.md)."""
    lexicon_phrases: float = 0.0
    """Weight of an auxiliary loss on short phrases built from the sentiment lexicon ("bad",
    "not bad", "never too loud") with the lexicon's reading as soft targets, so a negated
    negative word reads positive (engine/sentiment/lexicon_phrases.py; 0 = off)."""
    patience: int = 0
    """Stop after this many evaluations without a new best held-out accuracy (0 = run every
    epoch)."""
    ema_decay: float = 0.0
    """Keep an exponential moving average of the weights with this decay per step (Polyak
    averaging): the averaged weights are the ones evaluated, kept as the best epoch's and
    saved as model.pt (0 = off; engine/sentiment/weight_average.py). The decay is warmed up
    as min(decay, (1 + n) / (10 + n)) after n steps, so 0.99 (an average over about the last
    100 steps) holds from step 890 on; in shorter runs the average spans fewer steps, and
    with a learning rate decayed to 0 it ends close to the last weights."""
    log_every: int = 20
    """Emit a `step` event every k steps."""
    checkpoint_every_min: float = 5.0
    """Also checkpoint every N minutes inside an epoch (0 = only at epoch end)."""
    loss_threshold: float = 0.13
    """Report time-to-threshold when the smoothed train loss first drops below this."""
    seed: int = 0
    """Seed of model init and the per-epoch sample order."""
    threads: int | None = None
    """torch intra-op threads per rank (None = cores / local ranks)."""
    loader_workers: int = 0
    """DataLoader worker processes per rank."""
    length_buckets: bool = True
    """Batch rows of similar length together (engine/sentiment/order.py): each global batch is
    drawn from one length band of a 64-batch stretch of the epoch's order, so it is padded to
    little more than its own rows (on the GPU path every row runs to the batch's width). The
    order stays a function of the seed and epoch (and the lengths). On by default: accuracy
    level with random batches over three yardstick seeds, CPU training 1.3-1.4x faster, on an
    H200 1.05x at batch 256 and 1.67x at batch 2,048 (BENCHMARKS.md "Length buckets")."""
    amp: bool = True
    """bf16 autocast on CUDA."""
    max_train_samples: int | None = None
    """Use only the first N training samples (smoke runs, weak scaling)."""
    resume: bool = False
    """Continue from the latest checkpoint in run_dir."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto = CUDA device LOCAL_RANK when one is visible, else CPU."""
    grad_sync: Literal["auto", "overlap", "separate"] = "auto"
    """overlap = DDP all-reduces buckets during backward (fastest); separate = backward under
    no_sync() then one flat all-reduce, so forward+backward time is pure compute (what the
    balancer measures); auto = separate when balancing or straggling, else overlap."""
    eval_batch_size: int = 1024
    """Batch size of evaluation (per rank)."""
    eval_max_samples: int | None = None
    """Evaluate on at most this many test samples, a fixed evenly spread sample of the split
    (None = automatic: the whole split while scoring it costs at most ~10 % of an epoch, i.e.
    up to 0.3 × the training samples, since a forward pass is ~1/3 of a training step)."""
    data_cache: str | None = None
    """Folder for the node's uncompressed copy of the dataset that ranks memory-map (None =
    streams/ in the user cache folder: $SENTITOP_CACHE_DIR, else the platform's)."""
    checkpoint_every_steps: int = 0
    """Also checkpoint every N global steps (0 = off; deterministic, for tests)."""
    events_file: bool = True
    """Rank 0 appends every event to RUN_DIR/events.jsonl (turn off when a launcher already
    records stdout into that file)."""
    balance: BalanceConfig = field(default_factory=BalanceConfig)
    """Load balancer."""

    @property
    def sync_mode(self) -> Literal["overlap", "separate"]:
        """The gradient sync in effect: ``grad_sync`` with auto resolved (see there)."""
        if self.grad_sync != "auto":
            return self.grad_sync
        return "separate" if self.balance.enabled or self.balance.straggle else "overlap"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # inf or nan trains nothing and breaks the events
            value = getattr(self, f.name)
            if isinstance(value, float):
                _check(math.isfinite(value), f"train.{f.name}", "a finite number", value)
        _check(self.epochs >= 1, "train.epochs", ">= 1", self.epochs)
        _check(0 <= self.seed < 2**32, "train.seed", "0 .. 2**32-1", self.seed)  # numpy's range
        _check(self.batch_size >= 1, "train.batch_size", ">= 1", self.batch_size)
        _check(self.lr > 0, "train.lr", "> 0", self.lr)
        _check(
            self.lr_reference_batch >= 1,
            "train.lr_reference_batch",
            ">= 1",
            self.lr_reference_batch,
        )
        _check(self.warmup_steps >= 0, "train.warmup_steps", ">= 0", self.warmup_steps)
        _check(
            self.clip_grad_norm >= 0, "train.clip_grad_norm", ">= 0 (0 = off)", self.clip_grad_norm
        )
        _check(
            self.max_train_samples is None or self.max_train_samples >= 1,
            "train.max_train_samples",
            ">= 1",
            self.max_train_samples,
        )
        _check(
            self.lr_schedule in ("constant", "cosine", "linear"),
            "train.lr_schedule",
            "constant|cosine|linear",
            self.lr_schedule,
        )
        _check(
            self.optimizer in ("adam", "adamw", "sgd"),
            "train.optimizer",
            "adam|adamw|sgd",
            self.optimizer,
        )
        _check(self.weight_decay >= 0, "train.weight_decay", ">= 0", self.weight_decay)
        _check(self.eval_every >= 1, "train.eval_every", ">= 1", self.eval_every)
        _check(self.patience >= 0, "train.patience", ">= 0", self.patience)
        _check(0 <= self.ema_decay < 1, "train.ema_decay", "0 <= decay < 1", self.ema_decay)
        _check(self.lexicon_phrases >= 0, "train.lexicon_phrases", ">= 0", self.lexicon_phrases)
        _check(self.log_every >= 1, "train.log_every", ">= 1", self.log_every)
        _check(self.eval_batch_size >= 1, "train.eval_batch_size", ">= 1", self.eval_batch_size)
        _check(
            self.eval_max_samples is None or self.eval_max_samples >= 1,
            "train.eval_max_samples",
            ">= 1",
            self.eval_max_samples,
        )
        _check(
            self.checkpoint_every_steps >= 0,
            "train.checkpoint_every_steps",
            ">= 0",
            self.checkpoint_every_steps,
        )
        _check(self.loader_workers >= 0, "train.loader_workers", ">= 0", self.loader_workers)
        _check(self.threads is None or self.threads >= 1, "train.threads", ">= 1", self.threads)
        _check(self.device in ("auto", "cpu", "cuda"), "train.device", "auto|cpu|cuda", self.device)
        _check(
            self.grad_sync in ("auto", "overlap", "separate"),
            "train.grad_sync",
            "auto|overlap|separate",
            self.grad_sync,
        )
        _check(
            self.checkpoint_every_min >= 0,
            "train.checkpoint_every_min",
            ">= 0",
            self.checkpoint_every_min,
        )
        if isinstance(self.pos_weight, float | int):
            _check(self.pos_weight > 0, "train.pos_weight", "> 0, auto or none", self.pos_weight)
        else:
            _check(
                self.pos_weight in ("auto", "none"),
                "train.pos_weight",
                "> 0, auto or none",
                self.pos_weight,
            )


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A config dataclass as JSON-ready data: nested configs become dicts, dict keys strings."""

    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    data: dict[str, Any] = plain(cfg)
    return data


def config_from_dict(cls: type[C], data: Mapping[str, Any], where: str = "") -> C:
    """Inverse of :func:`config_to_dict`: unknown keys are a ConfigError naming them.

    Nested config fields are built from their dicts; ``dict[int, ...]`` keys come back as ints.
    """
    hints = type_hints(cls)  # type: ignore[arg-type]
    known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(known))
    label = where or cls.__name__
    if unknown:
        raise ConfigError(f"{label}: unknown key(s) {unknown}; expected some of {sorted(known)}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        kind = hints[name]
        if dataclasses.is_dataclass(kind) and isinstance(value, Mapping):
            value = config_from_dict(kind, value, f"{label}.{name}")  # type: ignore[arg-type]
        elif typing.get_origin(kind) is dict and isinstance(value, Mapping):
            key_type = typing.get_args(kind)[0]
            try:
                value = {key_type(k): v for k, v in value.items()}
            except (TypeError, ValueError):
                raise ConfigError(f"{label}.{name}: keys must be {key_type.__name__}") from None
        values[name] = value
    try:
        return cls(**values)
    except TypeError as exc:  # a required field missing
        raise ConfigError(f"{label}: {exc}") from None


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """Resolved field types of a config dataclass (its annotations are strings here)."""
    return typing.get_type_hints(cls)
