"""ProfilesScreen: the profiles folder — nodes, GPUs, $/h, validation errors; `r` runs one."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable, Static

from tui.format import fmt_usd
from tui.model.columns import Col
from tui.model.rows import ProfileRow
from tui.screens.base import SentitopScreen
from tui.screens.modals import ConfirmScreen
from tui.services import Services
from tui.widgets.fitted_table import FittedTable

COLUMNS = (
    Col("profile", 18, least=12, most=32),
    Col("cluster", 7),
    Col("nodes", 5, drop=1),
    Col("ranks", 5, drop=2),
    Col("device", 10, most=16),
    Col("$/h", 7),
    Col("status", 50, least=16, most=120),
)
"""Table columns: widths at a 120-column terminal, how far profile and status may shrink or grow
with the terminal, and what a narrow one leaves out first (nodes, then ranks)."""


def columns_for(rows: list[ProfileRow]) -> tuple[Col, ...]:
    """COLUMNS with the profile column at least as wide as the longest name (up to its most): a
    narrow terminal then leaves out nodes and ranks before it cuts a name (at 80 columns
    "aws-mixed-g4dn-g5" read "aws-mixed-g4d")."""
    need = max((len(_shown_name(r)) for r in rows), default=0)
    device = max((len(r.device or "") for r in rows), default=0)
    return tuple(
        replace(
            c,
            least=max(c.low, min(need, c.high)),
            width=max(c.width, min(need, c.high)),
            floor=c.low,  # narrower still only when the table cannot fit otherwise
        )
        if c.label == "profile"
        else replace(c, width=max(c.width, min(device, c.high)))  # "A10G + 2× T4" where it fits
        if c.label == "device"
        else c
        for c in COLUMNS
    )


@dataclass
class ProfilesLoaded(Message):
    """The profiles folder was read."""

    rows: list[ProfileRow]
    """Valid and invalid profiles, valid first."""


@dataclass
class RunRequested(Message):
    """The user asked to run a profile."""

    row: ProfileRow
    """The profile to run."""


class ProfilesScreen(SentitopScreen):
    """Lists profiles; shows the selected one's details or errors."""

    MODE = "profiles"
    CSS_PATH = Path(__file__).with_name("profiles.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "Run"),
        Binding("u", "reload", "Reload"),
    ]

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.rows: list[ProfileRow] = []
        """All profiles read (unfiltered)."""
        self.shown: list[ProfileRow] = []
        """Profiles in the table now (filtered)."""

    def compose_body(self) -> ComposeResult:
        yield FittedTable(COLUMNS, id="profiles-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="profile-detail")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.border_title = "profiles"  # the folder is named once read (after the first frame)
        self.query_one("#profile-detail", Static).border_title = "details"
        self.call_after_refresh(self.action_reload)  # paint the first frame, then read

    def folder(self) -> Path:
        """The folder read: the one given, else where the loader looks ($SENTITOP_PROFILES_DIR…)."""
        if self.services.profiles_dir is not None:
            return self.services.profiles_dir
        from remote.profile import profiles_dir

        return profiles_dir()

    def focus_body(self) -> None:
        self.query_one(DataTable).focus()

    def action_reload(self) -> None:
        self.set_note("reading profiles…")
        self._load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="profiles")
    def _load(self) -> None:
        self.post_message(ProfilesLoaded(self.services.load_profiles(self.services.profiles_dir)))

    def on_profiles_loaded(self, message: ProfilesLoaded) -> None:
        self.query_one(DataTable).border_title = Content(f"profiles in {shown_path(self.folder())}")
        self.rows = message.rows
        self.query_one(FittedTable).cols = columns_for(self.rows)  # refitted in apply_filter
        bad = sum(1 for r in self.rows if not r.valid)
        # words first: a leading "5 profiles" beside "4 Runs" reads like a fifth tab
        self.set_note(f"read {len(self.rows)} profile files" + (f", {bad} invalid" if bad else ""))
        self.apply_filter(self.filter_text)

    def apply_filter(self, text: str) -> None:
        needle = text.lower()
        before = self.selected() if self.is_mounted else None
        self.shown = [
            r for r in self.rows if not needle or needle in f"{r.name} {r.cluster} {r.path}".lower()
        ]
        # the highlighted profile stays highlighted when still shown: after `u` or a filter
        # the highlight had moved to the first row (an EC2 profile), where `r` would start it
        paths = [str(r.path) for r in self.shown]
        keep = paths.index(str(before.path)) if before and str(before.path) in paths else 0
        table = self.query_one(FittedTable)
        self._fill(table, keep)
        self._show_detail(self.shown[keep] if self.shown else None)
        table.call_after_refresh(table.refit)  # a scroll bar may have come or gone

    def on_fitted_table_refitted(self, message: FittedTable.Refitted) -> None:
        self._fill(message.table, message.cursor)
        self._show_detail(self.selected())  # its lines are cut to the new width

    def _fill(self, table: FittedTable, cursor: int) -> None:
        """The shown profiles as the table's rows, formatted for its widths; the cursor kept."""
        table.clear()
        width = table.width_of("status")
        for i, row in enumerate(self.shown):
            if not row.valid:
                status = Text(f"✗ {_short(row.errors[0], width - 2)}", style="red")
            elif row.warnings:
                status = Text(f"⚠ {row.warnings} warning(s)", style="yellow")  # in the details
            else:
                status = Text("✓ valid", style="green")
            table.add_fitted_row(
                Text(_shown_name(row)),  # file names and YAML values are foreign text, not markup
                Text(row.cluster or "—"),
                str(row.nodes or "—"),
                str(row.ranks or "—"),
                Text(row.device or "—"),
                fmt_usd(row.usd_per_hour, empty="free" if _free(row) else "—"),
                status,
                key=str(i),
            )
        if self.shown and cursor > 0:
            table.move_cursor(row=min(cursor, len(self.shown) - 1))

    def selected(self) -> ProfileRow | None:
        """The highlighted profile."""
        table = self.query_one(DataTable)
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(self.selected())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._show_detail(self.selected())

    def _show_detail(self, row: ProfileRow | None) -> None:
        self.services.selected_profile = Path(row.path) if row is not None and row.valid else None
        detail = self.query_one("#profile-detail", Static)
        if row is None:
            detail.update(
                Text(
                    "no profiles — put YAML files in " + shown_path(self.folder()),
                    style="dim",
                )
            )
            return
        text = Text.assemble((row.name, "bold"), ("  " + row.path, "dim"), "\n")
        if not row.valid:
            text.append("does not validate:\n", style="bold red")
            for error in row.errors:
                text.append(f"  {error}\n", style="red")
            text.append("fix the file and press u to reload", style="dim")
        else:
            text.append(
                f"cluster {row.cluster or '?'} · {row.nodes} node(s) · {row.ranks} rank(s) on "
                f"{row.device or '?'} · "
            )
            text.append(f"{fmt_usd(row.usd_per_hour)}/h\n", style="yellow")
            if row.detail:
                text.append(row.detail + "\n")
            width = detail.content_size.width  # 0 before the first layout
            text.append(_describe(row.profile, width - KEY_WIDTH if width else DETAIL_WIDTH))
            text.append("\npress r to run this profile", style="dim")
        detail.update(text)

    def action_run(self) -> None:
        row = self.selected()
        if row is None:
            self.notify("no profile selected", severity="warning")
        elif not row.valid:
            self.notify(
                f"{row.name} does not validate: {row.errors[0]}", severity="error", markup=False
            )
        elif row.changed_on_disk():  # it ran the settings read at the last reload, silently
            self.notify(
                f"{row.path} changed since it was read: read again — check it, then press r",
                severity="warning",
                markup=False,
            )
            self.action_reload()
        elif bills(row) and not _live(self):  # one key must not start EC2 (a live run: the
            # app asks before it stops that one, and says this too)
            self.app.push_screen(
                ConfirmScreen(
                    "Start paid machines?",
                    f"{row.name} starts {bills(row)}, billed from their start until they are "
                    "torn down (at the run's end, on s, or on q).",
                    yes="Start",
                    no="Cancel",
                ),
                lambda yes: self._confirmed_run(row, yes),
            )
        else:
            self.post_message(RunRequested(row))

    def _confirmed_run(self, row: ProfileRow, yes: bool | None) -> None:
        if yes:
            self.post_message(RunRequested(row))


def _live(screen: SentitopScreen) -> bool:
    """Whether the dashboard is driving a live run (the app then asks before starting another)."""
    run_screen = getattr(screen.app, "run_screen", None)
    return bool(getattr(run_screen, "live", False))


def bills(row: ProfileRow) -> str:
    """What of a profile's run costs money as it starts (EC2 nodes, an EMR cluster), in words;
    empty for a run on this machine or on SSH nodes."""
    profile = row.profile
    what = []
    if row.cluster == "ec2":
        what.append(f"{row.nodes} EC2 instance(s) ({row.device or '?'})")
    preprocess = getattr(profile, "preprocess", None)
    if getattr(preprocess, "runner", None) == "emr":
        what.append("an EMR cluster for preprocessing")
    if not what:
        return ""
    rate = f" at {fmt_usd(row.usd_per_hour)}/h" if row.usd_per_hour else ""
    return " and ".join(what) + rate


def _free(row: ProfileRow) -> bool:
    """A local profile with no price asked for: an unpriced instance_type is unknown, not free."""
    return row.cluster == "local" and not getattr(row.profile, "instance_type", None)


def _short(error: str, width: int = 60) -> str:
    """First line of an error, cut to ``width`` characters."""
    line = error.splitlines()[0] if error else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def shown_path(path: Path) -> str:
    """A folder as the user knows it: relative to the working folder when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


KEY_WIDTH = 12
"""Columns of a details line's section name (and the space after it)."""
DETAIL_WIDTH = 96
"""Characters of a section's settings shown before the details pane has a width."""


def _describe(profile: Any, room: int = DETAIL_WIDTH) -> Text:
    """The profile's settings, one line per section: `train  epochs 5 · batch_size 1024`,
    each cut to ``room`` characters (the pane's width after the section name)."""
    dump = getattr(profile, "model_dump", None)
    if not callable(dump):
        return Text()
    lines: list[tuple[str, str]] = []
    for key, value in dump(exclude_none=True).items():
        if key in ("name", "description", "provider"):
            continue  # shown above
        if key == "preprocess" and isinstance(value, dict) and value.get("runner") != "emr":
            value = {k: v for k, v in value.items() if k != "emr"}  # a cluster it never starts
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines += [(f"{key}[{i}]", _settings(v)) for i, v in enumerate(value)]
        elif value not in ([], {}, ""):
            lines.append((key, _settings(value) if isinstance(value, dict) else _value(value)))
    text = Text()
    for key, shown in lines[:12]:
        room = max(room, 20)
        shown = shown if len(shown) <= room else shown[: room - 1] + "…"
        text.append(f"{key:<{KEY_WIDTH - 1}} ", style="bold").append(shown + "\n")
    return text


def _settings(data: dict[str, Any], prefix: str = "") -> str:
    """Nested settings as `a 1 · b.c x · d [1, 2]` (empty ones left out)."""
    parts = []
    for key, value in data.items():
        if isinstance(value, dict):
            if inner := _settings(value, f"{prefix}{key}."):
                parts.append(inner)
        elif value not in ([], {}, ""):
            parts.append(f"{prefix}{key} {_value(value)}")
    return " · ".join(parts)


def _value(value: Any) -> str:
    """One setting as YAML writes it: true/false, 2GB-style sizes stay numbers, lists inline."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value)
    return str(value)


def _shown_name(row: ProfileRow) -> str:
    """The profile's name, with its file's when they differ (copies of one profile under other
    file names all carry the same name inside)."""
    file = Path(row.path).name
    return row.name if Path(row.path).stem == row.name else f"{row.name} ({file})"
