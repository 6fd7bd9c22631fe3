"""Profile sections shared by every provider: data, preprocess (with EMR), train, budget."""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from engine.config import MAX_SEQ_LEN, PreprocessConfig, TrainConfig, config_from_dict

InstanceTypeName = Annotated[
    str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$", max_length=40)
]
"""An EC2 instance type such as g5.xlarge."""

PathText = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f]+$", max_length=4096)]
"""A path or command word: any text without control characters (newlines, NUL, escapes)."""

S3Uri = Annotated[
    str, StringConstraints(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,62}(/[^\x00-\x1f\x7f]*)?$")
]
"""s3://bucket or s3://bucket/prefix."""


_DURATION = re.compile(
    r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m(?:in)?)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)


def parse_seconds(value: object) -> object:
    """Seconds from a duration such as 90, 90s, 15m, 15min, 1h or 1h30m (numbers pass as
    seconds; other values are left for the field's own check)."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower().replace(" ", "")
    match = _DURATION.fullmatch(text)
    if text and match and any(match.groupdict().values()):
        h, m, s = (float(match[k] or 0) for k in "hms")
        return h * 3600 + m * 60 + s
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ValueError(f"cannot read {value!r} as a duration; give e.g. 90s, 15m, 1h30m or 900")
    return seconds


Seconds = Annotated[float, BeforeValidator(parse_seconds)]
"""A duration in seconds, written 900, 90s, 15m, 15min, 1h or 1h30m."""


class Section(BaseModel):
    """Base of every profile section: unknown keys are errors; docstrings document fields."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, strict=True
    )


class SyntheticData(Section):
    """Generate McAuley-format reviews instead of reading files (the embedded default)."""

    size: int = Field(ge=10_000, le=10**12)
    """Uncompressed bytes to generate: 30MB, 1GB, 1.5GiB or a byte count (at least 10KB).
    By default 85 % of the lines repeat a text, as in the real corpus: below about 1MB the test
    split may hold too few reviews of both classes (seed 0: 500KB gives 11, all positive), and
    the run stops at the dataset check; raise `distinct` for small, quick data."""
    seed: int = 0
    """Random seed of the generator (same seed and size, same bytes)."""
    distinct: float | None = Field(default=None, gt=0.0, le=1.0)
    """Share of the lines whose text is distinct (default: the real corpus's 0.15); 0.9 makes a
    small file hold six times the reviews after de-duplication."""

    @field_validator("size", mode="before")
    @classmethod
    def _parse_size(cls, value: object) -> object:
        if isinstance(value, str):
            from engine.errors import InputError
            from engine.synth.size import parse_size

            try:
                return parse_size(value, name="size")
            except InputError:
                raise ValueError(
                    f"cannot read {value!r} as a size; give e.g. 30MB, 1GB, 1.5GiB"
                ) from None
        return value


class DataSpec(Section):
    """What to preprocess: input files or synthetic reviews (exactly one)."""

    inputs: list[PathText] = []
    """Raw review files (plain or .gz): local paths, or s3:// URIs for the EMR runner."""
    synthetic: SyntheticData | None = None
    """Generate reviews: {size: N, seed: S}."""

    @model_validator(mode="after")
    def _exactly_one(self) -> DataSpec:
        if bool(self.inputs) == (self.synthetic is not None):
            raise ValueError("give exactly one of data.inputs (a list of files) or data.synthetic")
        return self


class EMRSpec(Section):
    """The EMR cluster that runs preprocessing when preprocess.runner is emr."""

    s3: S3Uri | None = None
    """Writable s3://bucket/prefix for inputs, temporary files and parts (needed for emr)."""
    instance_type: InstanceTypeName = "m5.xlarge"
    """EC2 type of the core nodes."""
    master_instance_type: InstanceTypeName | None = None
    """EC2 type of the master node (default: instance_type)."""
    count: int = Field(default=2, ge=1, le=100)
    """Number of core nodes (a master node is added)."""
    spot: bool = False
    """Run the core nodes on spot capacity."""
    spot_bid_usd: float | None = Field(default=None, gt=0)
    """Maximum spot price per instance-hour in USD (needs spot: true)."""
    release_label: Annotated[str, StringConstraints(pattern=r"^emr-\d+\.\d+\.\d+$")] = "emr-7.2.0"
    """EMR release, e.g. emr-7.2.0 (7.x has python3.11)."""
    python: PathText | None = None
    """Interpreter on the EMR nodes (default: the EMR runner's, python3.11)."""
    bootstrap: list[str] = []
    """Extra bootstrap shell commands, run after the project is installed on every node."""
    key_name: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    """EC2 key pair for SSH to the master (lets mrjob show task progress)."""
    subnet: Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]+$")] | None = None
    """Subnet id (default: the default VPC)."""

    @model_validator(mode="after")
    def _bid_needs_spot(self) -> EMRSpec:
        if self.spot_bid_usd is not None and not self.spot:
            raise ValueError(
                "spot_bid_usd is set but spot is false; set spot: true or drop the bid"
            )
        return self

    def settings_kwargs(self, region: str) -> dict[str, object]:
        """Keyword arguments for remote.emr.EMRSettings (unset fields keep its defaults)."""
        kwargs: dict[str, object] = {
            "s3": self.s3,
            "region": region,
            "master_instance_type": self.master_instance_type or self.instance_type,
            "core_instance_type": self.instance_type,
            "core_count": self.count,
            "release_label": self.release_label,
            "bootstrap": list(self.bootstrap),
            "spot_bid": self.spot_bid_usd if self.spot else None,
            "python": self.python,
            "key_name": self.key_name,
            "subnet": self.subnet,
        }
        return {k: v for k, v in kwargs.items() if v is not None}


class PreprocessSpec(Section):
    """Preprocessing settings (unset fields take the engine defaults)."""

    runner: Literal["local", "inline", "spark", "hadoop", "emr"] = "local"
    """Where the MapReduce steps run."""
    workers: int | None = Field(default=None, ge=1)
    """Worker processes of the local runner (default: all cores)."""
    vocab_size: int | None = Field(default=None, ge=1)
    """Words given ids (default 30000)."""
    seq_len: int | None = Field(default=None, ge=1, le=MAX_SEQ_LEN)
    """Tokens per sequence (default 256)."""
    test_fraction: float | None = Field(default=None, ge=0, lt=1)
    """Fraction of texts in the test split (default 0.1)."""
    format: Literal["auto", "mcauley", "jsonl"] | None = None
    """Input record format (default auto)."""
    text_field: str | None = None
    """Review text field of generic JSON lines."""
    rating_field: str | None = None
    """Rating field of generic JSON lines."""
    label_field: str | None = None
    """0/1 label field (1 = positive) of generic JSON lines, instead of a rating."""
    append_summary: bool | None = None
    """Append the summary field to the text."""
    title_rows: bool | None = None
    """Each training review's title is a training row too (default false)."""
    preset: Literal["default", "stopwords", "seed"] | None = None
    """Text rules: default (every word kept), stopwords (NLTK's stopwords dropped, negations
    kept) or seed (the seed's exact stopword rules)."""
    keep_negations: bool | None = None
    """Keep not/no/nor/n't instead of dropping them (default: the preset's choice)."""
    memory_budget: int | None = Field(default=None, ge=1 << 20)
    """Local runner: memory its workers may use together before they spill to disk, e.g.
    "4GB" (default: half the available memory)."""
    max_skipped_share: float | None = Field(default=None, ge=0, le=1)
    """Warn when more than this share of the lines is skipped (default 0.2)."""
    min_class_share: float | None = Field(default=None, ge=0, lt=0.5)
    """Warn when the rarer class holds less than this share of the reviews (default 0.05)."""
    emr: EMRSpec = EMRSpec()
    """EMR cluster settings (used when runner is emr)."""

    @field_validator("memory_budget", mode="before")
    @classmethod
    def _parse_budget(cls, value: object) -> object:
        if isinstance(value, str):
            from engine.errors import InputError
            from engine.synth.size import parse_size

            try:
                return parse_size(value, name="memory_budget")
            except InputError:
                raise ValueError(f"cannot read {value!r} as a size; give e.g. 512MB, 4GB") from None
        return value

    @model_validator(mode="after")
    def _emr_needs_s3(self) -> PreprocessSpec:
        if self.runner == "emr" and self.emr.s3 is None:
            raise ValueError("runner emr needs emr.s3: a writable s3://bucket/prefix")
        return self

    def to_config(self, inputs: list[str], output_dir: str) -> PreprocessConfig:
        """The engine config (raises engine ConfigError on values the engine refuses)."""
        fields = self.model_dump(exclude={"emr"}, exclude_none=True)
        return PreprocessConfig(inputs=inputs, output=output_dir, **fields)


class ModelSpec(Section):
    """Model shape (unset fields take the preset's values)."""

    preset: Literal["default", "seed"] = "default"
    """default, or seed (the old system's model)."""
    embedding_dim: int | None = Field(default=None, ge=1)
    """Embedding size."""
    hidden: int | None = Field(default=None, ge=1)
    """LSTM hidden size."""
    layers: int | None = Field(default=None, ge=1)
    """LSTM layers."""
    bidirectional: bool | None = None
    """Bidirectional LSTM."""
    dropout: float | None = Field(default=None, ge=0, lt=1)
    """Dropout probability."""
    embed_dropout: float | None = Field(default=None, ge=0, lt=1)
    """Dropout on the embedded tokens."""
    ngram_buckets: int | None = Field(default=None, ge=0)
    """Wide path: hash buckets of a linear bag of unigrams and bigrams added to the LSTM's
    logit (0 = off; the default preset has 1 M, the seed preset none)."""
    ngram_scale: float | None = Field(default=None, gt=0)
    """Multiplier of the wide path's score: its learning rate relative to the LSTM's (default
    preset 10)."""
    negation_scope: int | None = Field(default=None, ge=0)
    """Wide path: words after a negation counted as negated features, "not_bad" apart from
    "bad" (0 = off; the default preset has 3)."""
    lexicon_prior: bool | None = None
    """Wide path: each text's sentiment-lexicon valence, flipped inside a negation scope, as
    three more features (on in the default preset)."""
    lexicon_tokens: bool | None = None
    """LSTM: each token's lexicon valence and negation-scope flag beside its embedding (needs
    lexicon_prior)."""
    companion: bool | None = None
    """After training: an NB-weighted logistic regression over the training rows' word and
    word-pair ids, blended with the network on validation (on in the default preset)."""
    init_embeddings: str | None = None
    """Folder of a finished `sentitop embed` run whose vectors initialise the embedding table
    (aligned by word; embedding_dim follows the run's; copied to every node), or `svd`: vectors
    from the training split's own text, computed at training start."""


class BalanceSpec(Section):
    """Dynamic load balancer: re-split data shares and batch sizes by measured speed."""

    enabled: bool = False
    """Turn the balancer on (useful for heterogeneous nodes)."""
    every_epochs: int | None = Field(default=None, ge=1)
    """Rebalance after every X epochs (default 1)."""
    every_steps: int | None = Field(default=None, ge=0)
    """Also rebalance every K steps inside an epoch (0 = never; default 0)."""
    measure: Literal["fwd_bwd", "forward"] | None = None
    """Time forward+backward (fwd_bwd, default) or forward only."""
    smoothing: float | None = Field(default=None, gt=0, le=1)
    """Weight of the newest speed measurement (default 0.5)."""
    hysteresis: float | None = Field(default=None, ge=0, lt=1)
    """Do not move shares while every rank is within this fraction of its balanced share
    (relative; default 0.02)."""
    min_share: float | None = Field(default=None, gt=0, lt=1)
    """No rank gets less than this fraction of the data (default 0.05)."""
    straggle: dict[Annotated[int, Field(ge=0)], Annotated[float, Field(ge=1)]] = {}
    """Injected slowness for tests/benchmarks: {rank: factor >= 1}."""
    emulate_s: float | None = Field(default=None, ge=0)
    """Emulated device seconds per sample for tests/demos (default 0: off); see the engine's
    BalanceConfig.emulate_s."""


class TrainSpec(Section):
    """Training settings (unset fields take the engine defaults)."""

    model: ModelSpec = ModelSpec()
    """Model shape."""
    epochs: int | None = Field(default=None, ge=1)
    """Number of epochs (default 3)."""
    batch_size: int | None = Field(
        default=None, ge=1, validation_alias=AliasChoices("batch_size", "batch")
    )
    """Global batch size, summed over ranks (default 256; `batch` is accepted too)."""
    lr: float | None = Field(default=None, gt=0)
    """Learning rate at the reference batch, lr_reference_batch (default 0.008)."""
    lr_reference_batch: int | None = Field(default=None, ge=1)
    """Global batch at which lr applies; other batches scale it linearly (default 256)."""
    clip_grad_norm: float | None = Field(default=None, ge=0)
    """Gradient clipping max norm (0 = off; default 1.0)."""
    lexicon_phrases: float | None = Field(default=None, ge=0)
    """Weight of the auxiliary loss on sentiment-lexicon phrases ("not bad") with the lexicon's
    reading as soft targets (0 = off, the default)."""
    warmup_steps: int | None = Field(default=None, ge=0)
    """Linear learning-rate warm-up steps (default 100)."""
    lr_schedule: Literal["constant", "cosine", "linear"] | None = None
    """Learning rate after the warm-up: constant, or cosine (default) / linear decay to 0."""
    optimizer: Literal["adam", "adamw", "sgd"] | None = None
    """adam (default), adamw (decoupled weight decay) or sgd."""
    weight_decay: float | None = Field(default=None, ge=0)
    """Weight decay of the optimizer (default 0)."""
    pos_weight: float | Literal["auto", "none"] | None = None
    """Positive-class weight: a number > 0, auto (negatives/positives of the training set) or
    none (default: unweighted, the most accurate on the Amazon files)."""
    eval_every: int | None = Field(default=None, ge=1)
    """Evaluate every N epochs and after the last (default 1)."""
    keep_best: bool | None = None
    """Finish with the weights of the epoch with the best held-out accuracy (default true)."""
    blend_paths: bool | None = None
    """Fit the deep and wide paths' mix and a bias on the validation split after training
    (default true)."""
    patience: int | None = Field(default=None, ge=0)
    """Stop after N evaluations without a new best held-out accuracy (0 = never; default 0)."""
    ema_decay: float | None = Field(default=None, ge=0, lt=1)
    """Evaluate, keep and save an exponential moving average of the weights with this decay
    per step, warmed up over the first steps (0 = off, the default)."""
    log_every: int | None = Field(default=None, ge=1)
    """Emit a step event every k steps (default 20)."""
    checkpoint_every_min: float | None = Field(default=None, ge=0)
    """Checkpoint every N minutes inside an epoch too (0 = epoch ends only; default 5)."""
    loss_threshold: float | None = Field(default=None, gt=0)
    """Report the time until the smoothed train loss drops below this (default 0.13)."""
    seed: int | None = None
    """Seed of model init and sample order (default 0)."""
    threads: int | None = Field(default=None, ge=1)
    """torch threads per rank (default: cores / local ranks)."""
    loader_workers: int | None = Field(default=None, ge=0)
    """DataLoader workers per rank (default 0)."""
    length_buckets: bool | None = None
    """Batch rows of similar length together: less padding per batch (default true)."""
    amp: bool | None = None
    """bf16 autocast on CUDA (default true)."""
    max_train_samples: int | None = Field(default=None, ge=1)
    """Use only the first N training samples."""
    device: Literal["auto", "cpu", "cuda"] | None = None
    """auto (default: CUDA when visible), cpu or cuda."""
    grad_sync: Literal["auto", "overlap", "separate"] | None = None
    """auto (default: separate when balancing, else overlap), overlap (all-reduce during
    backward) or separate (pure compute timing)."""
    eval_batch_size: int | None = Field(default=None, ge=1)
    """Evaluation batch size per rank (default 1024)."""
    eval_max_samples: int | None = Field(default=None, ge=1)
    """Evaluate on a fixed sample of at most this many test rows (default: the whole split
    up to 0.3 × the training samples, ~10 % of an epoch)."""
    data_cache: str | None = None
    """Folder on each node for the uncompressed dataset copy the ranks memory-map (default:
    streams/ in $SENTITOP_CACHE_DIR or the user cache folder)."""
    checkpoint_every_steps: int | None = Field(default=None, ge=0)
    """Also checkpoint every N global steps (0 = off; default 0)."""
    nproc: int | None = Field(default=None, ge=1, le=256)
    """Training processes on this machine (provider local only; default 1)."""
    balance: BalanceSpec = Field(
        default=BalanceSpec(), validation_alias=AliasChoices("balance", "balancer")
    )
    """Dynamic load balancer (`balancer` is accepted too)."""

    def to_config(self, data_dir: str, run_dir: str) -> TrainConfig:
        """The engine config (same field names; raises engine ConfigError on refused values)."""
        values = self.model_dump(exclude={"nproc"}, exclude_none=True)
        return config_from_dict(TrainConfig, {"data_dir": data_dir, "run_dir": run_dir, **values})


class BudgetSpec(Section):
    """Money limits: stop (and tear down) before max_usd; refuse to launch above the rate."""

    max_usd: float | None = Field(default=None, gt=0)
    """Stop the run before its cost would exceed this many USD."""
    max_usd_per_hour: float | None = Field(default=None, gt=0)
    """Refuse to launch when the profile's machines cost more than this per hour."""


class RecoverySpec(Section):
    """What the run does when a node is lost (spot interruption, SSH drop, instance gone, crash)."""

    on_node_loss: Literal["fail", "shrink", "replace"] = "fail"
    """fail (default: stop the run), shrink (continue on the nodes left, any provider) or
    replace (ec2: start a new instance of the lost node's group; local: restart the node)."""
    max_restarts: int = Field(default=3, ge=0, le=100)
    """Most recoveries in one run; the next node loss fails it."""
    deadline_min: float | None = Field(default=None, gt=0)
    """No recovery starts later than this many minutes after the run began (default: none)."""
    spot_poll_s: float = Field(default=5.0, ge=0.5, le=120)
    """Seconds between polls of each spot node's interruption notice (instance metadata)."""
    notice_checkpoint_s: float = Field(default=60.0, ge=1, le=110)
    """After an interruption notice, longest wait for the checkpoint it asks for (AWS gives
    two minutes) before the node is given up anyway."""
    stall_timeout: Seconds = Field(default=600.0, ge=2, le=24 * 3600)
    """600, 10m or 1h (default 10m): once training began, a silence of every rank this long
    (or 5 × the longest gap seen, if longer) fails the run and stops its nodes — a frozen rank
    held the others in the all-reduce, billing, for 30 minutes or for ever."""
