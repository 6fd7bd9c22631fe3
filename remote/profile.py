"""Cluster profiles: YAML validated with pydantic, converted once into the engine's configs.

``load_profile(path)`` returns a :class:`LocalProfile`, :class:`SSHProfile` or
:class:`EC2Profile` (all :class:`Profile`); errors are :class:`ProfileError` naming the file,
the line, the field path (``nodes[1].gpus``) and what is allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from engine.config import PreprocessConfig, TrainConfig
from engine.errors import ConfigError, ProfileError
from remote.clusters.dead_man import DEFAULT_LIMIT_S
from remote.cost import CostLine, check_launch_budget
from remote.pricing import Catalog, PriceBook, load_catalog
from remote.profile_spec import (
    BudgetSpec,
    DataSpec,
    InstanceTypeName,
    PathText,
    PreprocessSpec,
    RecoverySpec,
    Seconds,
    Section,
    TrainSpec,
)
from remote.yaml_errors import Problem, YamlSyntaxError, line_of, load_yaml, problems_from

DEFAULT_PROFILE = "local"
"""The embedded default profile (profiles/local.yaml)."""

UNSUPPORTED_GPUS = {
    "K80": "Kepler, compute capability 3.7",
    "M60": "Maxwell, compute capability 5.2",
}
"""GPU models that current PyTorch CUDA builds no longer support."""

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]
Host = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9_\[][A-Za-z0-9_.:\[\]-]*$", max_length=253)
]
User = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$")]
REGION_PATTERN = r"^[a-z]{2}(-gov)?-[a-z]+-\d$"
"""The form of an AWS region name (us-east-1, us-gov-west-1)."""
Region = Annotated[str, StringConstraints(pattern=REGION_PATTERN)]


class SSHNodeSpec(Section):
    """A machine reached over SSH."""

    name: Name | None = None
    """Label in logs and the dashboard (letters, digits, '.', '_', '-'; default: host)."""
    host: Host
    """Hostname or IP address (letters, digits, '.', '-', ':', '[', ']')."""
    port: int = Field(default=22, ge=1, le=65535)
    """SSH port."""
    user: User | None = None
    """Login user (default: your user name)."""
    key: PathText | None = None
    """Private key file (default: ssh-agent and ~/.ssh keys)."""
    gpus: int = Field(default=0, ge=0, le=64)
    """GPUs on the node (0 = train on CPU)."""
    nproc: int | None = Field(default=None, ge=1, le=256)
    """Training processes on the node (default: gpus, or 1 without GPUs)."""
    instance_type: InstanceTypeName | None = None
    """EC2 type whose price stands for this machine in the cost meter (none = free)."""

    @property
    def label(self) -> str:
        """The node's name in logs."""
        return self.name or self.host


class EC2NodeGroup(Section):
    """Identical EC2 instances started for the run."""

    name: Name | None = None
    """Label prefix in logs (letters, digits, '.', '_', '-'; default: the instance type)."""
    instance_type: InstanceTypeName
    """EC2 instance type, e.g. g5.xlarge."""
    count: int = Field(default=1, ge=1, le=64)
    """Number of instances."""
    spot: bool = False
    """Use spot capacity (cheaper, can be reclaimed)."""
    spot_max_usd: float | None = Field(default=None, gt=0)
    """Highest spot price per instance-hour in USD (needs spot: true; default: on-demand price)."""
    ami: Annotated[str, StringConstraints(pattern=r"^ami-[0-9a-f]{8,17}$")] | None = None
    """AMI id (default: the runner's deep-learning AMI for the region)."""
    user: User = "ubuntu"
    """SSH login user of the AMI."""
    key_name: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = None
    """EC2 key pair name."""
    key: PathText | None = None
    """Private key file of key_name (default: ssh-agent and ~/.ssh keys)."""
    subnet: Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]+$")] | None = None
    """Subnet id (default: the default VPC)."""
    security_group: Annotated[str, StringConstraints(pattern=r"^sg-[0-9a-f]+$")] | None = None
    """Security group id; must allow SSH and the nodes to reach each other."""
    gpus: int | None = Field(default=None, ge=0, le=64)
    """GPUs per instance (default: from the price catalog)."""
    nproc: int | None = Field(default=None, ge=1, le=256)
    """Training processes per instance (default: gpus, or 1 without GPUs)."""

    @model_validator(mode="after")
    def _max_needs_spot(self) -> EC2NodeGroup:
        if self.spot_max_usd is not None and not self.spot:
            raise ValueError("spot_max_usd is set but spot is false; set spot: true or drop it")
        return self


class Profile(Section):
    """What every profile has; subclasses add the provider's nodes."""

    name: Name
    """Profile name shown in the dashboard and run folders (letters, digits, '.', '_', '-')."""
    description: str = ""
    """One line about the profile."""
    provider: Literal["local", "ssh", "ec2"]
    """Where training runs: local processes, SSH nodes, or EC2 instances."""
    region: Region = "us-east-1"
    """AWS region for EC2, EMR and prices."""
    python: PathText | None = None
    """Python interpreter on the nodes (default: this interpreter locally, python3 remotely)."""
    data: DataSpec
    """Input files or synthetic reviews."""
    preprocess: PreprocessSpec = PreprocessSpec()
    """Preprocessing settings."""
    train: TrainSpec = TrainSpec()
    """Training settings."""
    budget: BudgetSpec = BudgetSpec()
    """Money limits."""
    recovery: RecoverySpec = RecoverySpec()
    """What happens when a node is lost mid-run (budgets hold across restarts)."""
    _source: Path | None = PrivateAttr(default=None)

    @property
    def source(self) -> Path | None:
        """The file the profile was loaded from."""
        return self._source

    @property
    def where(self) -> str:
        """How errors name the profile: its file, or its name when it has none."""
        return str(self._source) if self._source else f"profile {self.name!r}"

    def check_key_files(self) -> None:
        """Refuse (ProfileError, exit 2) a node whose private key file is not there: SSH would
        say so only at its first connection, after EC2 instances started billing. (A local
        profile has no nodes.)"""
        for i, node in enumerate(getattr(self, "nodes", [])):
            if node.key and not Path(node.key).expanduser().is_file():
                raise ProfileError(
                    f"{self.where}: nodes[{i}].key: {node.key} is not a file",
                    hint="name the private key the nodes accept (for EC2: the key pair "
                    "key_name's .pem), or drop key to use ssh-agent and ~/.ssh keys",
                )

    # -- conversion into engine configs --------------------------------------------------
    def to_preprocess_config(
        self, output_dir: str | Path, inputs: list[str] | None = None
    ) -> PreprocessConfig:
        """The engine's preprocessing config; ``inputs`` = the generated file for synthetic data."""
        files = (
            list(inputs)
            if inputs is not None
            else [os.path.expanduser(p) for p in self.data.inputs]
        )
        if not files:
            raise ValueError("synthetic data: generate it first and pass inputs=[path]")
        try:
            return self.preprocess.to_config(files, str(output_dir))
        except ConfigError as exc:
            raise ProfileError(f"{self.where}: preprocess: {exc.message}") from None

    def to_train_config(self, data_dir: str | Path, run_dir: str | Path) -> TrainConfig:
        """The engine's training config."""
        try:
            return self.train.to_config(str(data_dir), str(run_dir))
        except ConfigError as exc:
            raise ProfileError(f"{self.where}: {exc.message}") from None

    def resolved(self) -> dict[str, Any]:
        """The profile as plain data (saved in the run folder; holds no credentials)."""
        return self.model_dump(mode="json")

    # -- nodes, processes and money ------------------------------------------------------
    def world_size(self, catalog: Catalog | None = None) -> int:
        """Training processes over all nodes (here: the local ones; remote profiles sum nodes)."""
        return self.train.nproc or 1

    def instance_types(self, *, spot: bool | None = None) -> list[str]:
        """EC2 types the profile prices (nodes and EMR), without repeats; ``spot`` filters."""
        return list(dict.fromkeys(g[1] for g in self._all_groups() if spot is None or g[3] == spot))

    def price_book(self, **kwargs: Any) -> PriceBook:
        """Prices of this profile's instance types in its region (see remote.pricing.price_book)."""
        from remote.pricing import price_book

        kwargs.setdefault("instance_types", self.instance_types())
        kwargs.setdefault("spot_types", self.instance_types(spot=True))
        return price_book(self.region, **kwargs)

    def _priced_groups(self) -> list[tuple[str, str, int, bool, str]]:
        """(field, instance_type, count, spot, stage) of the training machines."""
        return []

    def _all_groups(self) -> list[tuple[str, str, int, bool, str]]:
        groups = list(self._priced_groups())
        if self.preprocess.runner == "emr":
            emr = self.preprocess.emr
            master = emr.master_instance_type or emr.instance_type
            groups.append(("preprocess.emr.master_instance_type", master, 1, False, "preprocess"))
            groups.append(
                (
                    "preprocess.emr.instance_type",
                    emr.instance_type,
                    emr.count,
                    emr.spot,
                    "preprocess",
                )
            )
        return groups

    def cost_lines(self, prices: PriceBook | Catalog) -> list[CostLine]:
        """One priced group per node entry (and the EMR master/core groups)."""
        book = (
            prices if isinstance(prices, PriceBook) else PriceBook.from_catalog(prices, self.region)
        )
        lines = []
        for where, instance_type, count, spot, stage in self._all_groups():
            price = book.price(instance_type, spot=spot)
            if price is None:
                raise ProfileError(
                    f"{self.where}: {where}: no price known for {instance_type!r}",
                    hint="check the type's spelling, or add a row for it to the user price "
                    "catalog (see `sentitop prices --help`)",
                )
            emr_usd = 0.0
            if stage == "preprocess":
                emr_usd = book.emr_usd(instance_type) or 0.0
            source = price.source + (
                "+estimated EMR"
                if stage == "preprocess" and book.emr_is_estimate(instance_type)
                else ""
            )
            label = (
                "emr " + ("master" if "master" in where else "core")
                if stage == "preprocess"
                else where.removesuffix(".instance_type").replace("instance_type", "local")
            )
            lines.append(
                CostLine(
                    name=f"{label} {instance_type}",
                    field=where,
                    instance_type=instance_type,
                    count=count,
                    usd_per_hour=price.usd_per_hour,
                    emr_usd_per_hour=emr_usd,
                    market=price.market,
                    stage=stage,  # type: ignore[arg-type]
                    source=source,
                )
            )
        return lines

    def price_error(self, prices: PriceBook | Catalog) -> ProfileError | None:
        """The error a run of this profile would stop with for want of a machine's price (None
        when every machine is priced): `profiles` and the dashboard call such a file invalid."""
        try:
            self.cost_lines(prices)
        except ProfileError as exc:
            return exc
        return None

    def hourly_usd(self, prices: PriceBook | Catalog, stage: str | None = None) -> float:
        """USD per hour of the machines of ``stage`` (None: all of them at once, the peak bound)."""
        return sum(
            line.total_usd_per_hour
            for line in self.cost_lines(prices)
            if stage is None or line.stage in (stage, "all")
        )

    def check_launch_budget(self, prices: PriceBook | Catalog) -> float:
        """The profile's $/h; raises BudgetError when it breaks budget.max_usd_per_hour."""
        rate = self.hourly_usd(prices)
        check_launch_budget(
            self.name,
            rate,
            max_usd_per_hour=self.budget.max_usd_per_hour,
            max_usd=self.budget.max_usd,
        )
        return rate

    def warnings(self, catalog: Catalog | None = None) -> list[str]:
        """Things that validate but will probably not do what the user wants."""
        catalog = catalog or load_catalog()
        out: list[str] = []
        for where, instance_type, _count, _spot, stage in self._all_groups():
            row = catalog.specs(instance_type)
            if row is None:
                out.append(
                    f"{where}: {instance_type!r} is not in the price catalog; "
                    "its cost cannot be shown"
                )
            elif row.gpu_model in UNSUPPORTED_GPUS and stage != "preprocess":
                out.append(
                    f"{where}: {instance_type} has NVIDIA {row.gpu_model} GPUs "
                    f"({UNSUPPORTED_GPUS[row.gpu_model]}), which current PyTorch CUDA builds do "
                    "not support; training would fail or fall back to CPU (use g4dn, g5 or g6)"
                )
        for i, path in enumerate(self.data.inputs):  # relative to where `run` is started
            if "://" not in path and not os.path.exists(os.path.expanduser(path)):
                where = (
                    ""
                    if os.path.isabs(os.path.expanduser(path))
                    else f", relative to {os.getcwd()}"
                )
                out.append(f"data.inputs[{i}]: no such file or folder here ({path!r}{where}): "
                           "`sentitop run` started here refuses to start it")  # fmt: skip
        world = self.world_size(catalog)
        for rank in self.train.balance.straggle:
            if rank >= world:
                out.append(
                    f"train.balance.straggle: rank {rank} does not exist (world size {world})"
                )
        return out


class LocalProfile(Profile):
    """Processes on this machine."""

    provider: Literal["local"]
    """local: training processes on this machine."""
    instance_type: InstanceTypeName | None = None
    """EC2 type whose price stands for this machine in the cost meter (none = free)."""

    def _priced_groups(self) -> list[tuple[str, str, int, bool, str]]:
        return (
            [("instance_type", self.instance_type, 1, False, "all")] if self.instance_type else []
        )


class _RemoteProfile(Profile):
    workdir: PathText = "~/sentitop"
    """Folder on every node holding the code, data and run outputs."""
    shared_fs: bool = False
    """Nodes see the same files under workdir (e.g. NFS): data is copied once, not per node."""
    known_hosts: PathText | None = None
    """known_hosts file used to check host keys (default: ~/.ssh/known_hosts)."""
    insecure_ignore_host_keys: bool = False
    """Skip SSH host-key checks (unsafe: allows man-in-the-middle). Must be set explicitly."""

    @field_validator("train")
    @classmethod
    def _no_local_nproc(cls, train: TrainSpec) -> TrainSpec:
        if train.nproc is not None:
            raise ValueError("train.nproc applies to provider local only; set nodes[i].nproc")
        return train

    def warnings(self, catalog: Catalog | None = None) -> list[str]:
        out = super().warnings(catalog)
        if self.insecure_ignore_host_keys:
            out.append("insecure_ignore_host_keys: true — SSH host keys are not checked")
        try:
            self.check_key_files()  # valid YAML, but a run would stop at once (exit 2)
        except ProfileError as exc:
            out.append(exc.message.removeprefix(f"{self.where}: ") + " here: a run stops before "
                       "it starts any machine")  # fmt: skip
        return out


class SSHProfile(_RemoteProfile):
    """Machines you already have, reached over SSH."""

    provider: Literal["ssh"]
    """ssh: nodes reached over SSH."""
    nodes: list[SSHNodeSpec] = Field(min_length=1, max_length=256)
    """The nodes; the first one hosts the rendezvous."""

    @field_validator("nodes")
    @classmethod
    def _distinct(cls, nodes: list[SSHNodeSpec]) -> list[SSHNodeSpec]:
        labels = [n.label for n in nodes]
        repeated = sorted({x for x in labels if labels.count(x) > 1})
        if repeated:
            raise ValueError(
                f"node names must differ; repeated: {', '.join(repeated)} (set name: on each)"
            )
        return nodes

    @field_validator("recovery")
    @classmethod
    def _no_replace(cls, recovery: RecoverySpec) -> RecoverySpec:
        if recovery.on_node_loss == "replace":
            raise ValueError(
                "on_node_loss: replace needs provider ec2 (sentitop cannot start SSH machines); "
                "use shrink (continue on the nodes left) or fail"
            )
        return recovery

    def world_size(self, catalog: Catalog | None = None) -> int:
        return sum(n.nproc or max(1, n.gpus) for n in self.nodes)

    def _priced_groups(self) -> list[tuple[str, str, int, bool, str]]:
        return [
            (f"nodes[{i}].instance_type", n.instance_type, 1, False, "train")
            for i, n in enumerate(self.nodes)
            if n.instance_type
        ]


class EC2Profile(_RemoteProfile):
    """EC2 instances started for the run and terminated after it."""

    provider: Literal["ec2"]
    """ec2: instances started (and terminated) by sentitop."""
    nodes: list[EC2NodeGroup] = Field(min_length=1, max_length=16)
    """Instance groups; the first instance of the first group hosts the rendezvous."""
    ready_timeout: Seconds | None = Field(default=None, ge=30, le=6 * 3600)
    """Wait for SSH: 900, 90s, 15m or 1h30m, from 30 s to 6 h (default 15m).
    The longest wait from launch until every instance runs and answers SSH (and shows its host
    keys). Past it the run fails naming the instances that never answered, and they are
    terminated; they are billed (and count against budget.max_usd) from the moment they run."""
    shutdown_unwatched_after: Seconds | None = Field(default=DEFAULT_LIMIT_S, ge=60, le=24 * 3600)
    """Dead man's switch: 600, 10m or 1h; null turns it off (default 10m).
    Each instance shuts itself down (and is terminated) when sentitop has not renewed its lease
    for this long: a launcher killed with SIGKILL, by the OOM killer or with its laptop can
    tear nothing down, and the instances billed on until someone noticed."""

    def gpus_per_instance(self, group: EC2NodeGroup, catalog: Catalog | None = None) -> int:
        """The group's GPUs: as given, else the catalog's, else 0."""
        if group.gpus is not None:
            return group.gpus
        row = (catalog or load_catalog()).specs(group.instance_type)
        return row.gpus if row else 0

    def world_size(self, catalog: Catalog | None = None) -> int:
        catalog = catalog or load_catalog()
        return sum(
            g.count * (g.nproc or max(1, self.gpus_per_instance(g, catalog))) for g in self.nodes
        )

    def _priced_groups(self) -> list[tuple[str, str, int, bool, str]]:
        return [
            (f"nodes[{i}].instance_type", g.instance_type, g.count, g.spot, "train")
            for i, g in enumerate(self.nodes)
        ]


AnyProfile = Annotated[LocalProfile | SSHProfile | EC2Profile, Field(discriminator="provider")]
_ADAPTER: TypeAdapter[LocalProfile | SSHProfile | EC2Profile] = TypeAdapter(AnyProfile)
_BY_PROVIDER: dict[str, type[Profile]] = {
    "local": LocalProfile,
    "ssh": SSHProfile,
    "ec2": EC2Profile,
}


def profile_schema() -> dict[str, Any]:
    """JSON schema of a profile file (every field with its description)."""
    return _ADAPTER.json_schema()


def profiles_dir() -> Path:
    """Where named profiles live: $SENTITOP_PROFILES_DIR, ./profiles, or the shipped folder."""
    env = os.environ.get("SENTITOP_PROFILES_DIR")
    if env:
        return Path(env).expanduser()
    here = Path("profiles")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent / "profiles"


def shipped_example() -> Path:
    """The default profile as sentitop ships it (a working example from any folder)."""
    return Path(__file__).resolve().parent.parent / "profiles" / f"{DEFAULT_PROFILE}.yaml"


def resolve_profile_path(name_or_path: str | Path) -> Path:
    """A path as given, or a bare name (``local``) looked up in :func:`profiles_dir`."""
    path = Path(name_or_path).expanduser()
    if path.exists() or path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        return path
    return profiles_dir() / f"{name_or_path}.yaml"


def _problems(text: str) -> tuple[Profile | None, list[Problem]]:
    try:
        data, node = load_yaml(text)
    except YamlSyntaxError as exc:
        return None, exc.problems
    if not isinstance(data, dict):
        return None, [Problem(1, "", "a profile is a mapping of fields (name:, provider:, …)")]
    provider = data.get("provider")
    try:
        return _ADAPTER.validate_python(data), []
    except ValidationError as exc:
        model = _BY_PROVIDER.get(provider) if isinstance(provider, str) else None
        if model is None:
            allowed = ", ".join(_BY_PROVIDER)
            got = "missing" if provider is None else f"{provider!r} is not allowed"
            line = line_of(node, ("provider",))
            return None, [Problem(line, "provider", f"{got}; expected one of {allowed}")]
        return None, problems_from(exc, node, model, strip_prefix=1)


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile file (or a name in the profiles folder)."""
    path = resolve_profile_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError(
            f"{path}: no such profile file",
            hint=f"see `sentitop profiles` for the profiles in {profiles_dir()}",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the profile ({exc})") from None
    profile, problems = _problems(text)
    if profile is None:
        raise ProfileError(
            _format(path, problems), hint=f"{shipped_example()} is a working example"
        )
    profile._source = path
    return profile


def _format(path: Path, problems: list[Problem]) -> str:
    if len(problems) == 1:
        return (
            f"{path}:{problems[0].line or 1}: {problems[0].path or 'profile'}: "
            f"{problems[0].message}"
        )
    lines = [f"{path}: {len(problems)} problems"]
    lines += [f"  {path}:{p.line or 1}: {p.path or 'profile'}: {p.message}" for p in problems]
    return "\n".join(lines)


@dataclass(slots=True)
class ProfileEntry:
    """One file of a profiles folder: the profile, or what is wrong with it."""

    path: Path
    profile: Profile | None = None
    error: str | None = None
    """The ProfileError message (None when valid)."""
    problems: list[Problem] = field(default_factory=list)
    """The problems one by one, with line and field path (for inline display)."""
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the file validated."""
        return self.profile is not None


def check_profile_file(path: str | Path, catalog: Catalog | None = None) -> ProfileEntry:
    """Validate one file without raising: the entry holds the profile or the problems."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ProfileEntry(
            path,
            error=f"{path}: cannot read ({exc})",
            problems=[Problem(None, "", f"cannot read ({exc})")],
        )
    profile, problems = _problems(text)
    if profile is None:
        return ProfileEntry(path, error=_format(path, problems), problems=problems)
    profile._source = path
    return ProfileEntry(path, profile=profile, warnings=profile.warnings(catalog))


def list_profiles(folder: str | Path | None = None) -> list[ProfileEntry]:
    """Every *.yaml/*.yml in ``folder`` (default: :func:`profiles_dir`), valid or not, by name."""
    folder = Path(folder) if folder is not None else profiles_dir()
    if not folder.is_dir():
        return []
    catalog = load_catalog()
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return [check_profile_file(p, catalog) for p in files]
