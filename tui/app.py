"""The sentitop dashboard: make_app() builds it (CLI and tests); run_dashboard() runs it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from engine.errors import SentitopError
from engine.stop_rules import STOP_CHECKPOINT_S
from tui.model.event_text import readable_text
from tui.screens.base import WorkerFailed
from tui.screens.help import HelpScreen
from tui.screens.modals import ConfirmScreen, ErrorScreen
from tui.screens.prices import PricesScreen
from tui.screens.profiles import ProfilesScreen, RunRequested, bills
from tui.screens.run import FeedEnded, RunScreen
from tui.screens.runs import ReplayRequested, RunsScreen
from tui.services import Services
from tui.widgets.nav import SCREENS

MODE_ORDER = [mode for mode, _ in SCREENS]


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""Signals that end the dashboard as `q` does, a live run stopped and torn down first (in the
terminal's raw mode Ctrl-C is a key, so a SIGINT comes only from outside)."""


STOP_WORDS = f"a checkpoint at its next step, waiting up to {STOP_CHECKPOINT_S:g} s"
"""What stopping a live run does, as the confirmations say it (remote.runner's stop)."""
EXIT_WATCHDOG_S = 10.0
"""How long the app may take to leave after a stop signal or a quit before it is ended."""


def _exit_later(code: int) -> None:
    time.sleep(EXIT_WATCHDOG_S)
    os._exit(code)


class SentitopApp(App[int]):
    """Four screens (as modes) plus help, confirm and error modals; handlers live on screens."""

    TITLE = "sentitop"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit_app", "Quit"),
        Binding("1", "switch_mode('profiles')", "Profiles", show=False),
        Binding("2", "switch_mode('prices')", "Prices", show=False),
        Binding("3", "switch_mode('run')", "Run", show=False),
        Binding("4", "switch_mode('runs')", "Runs", show=False),
        Binding("tab", "cycle_screen(1)", "Next screen", show=False, priority=True),
        Binding("shift+tab", "cycle_screen(-1)", "Previous screen", show=False, priority=True),
    ]

    def __init__(
        self,
        services: Services,
        *,
        replay: Path | None = None,
        speed: float = 0.0,
        start: str | None = None,
    ) -> None:
        super().__init__()
        self.services = services
        """Back ends shared by the screens."""
        self.replay_path = replay
        self.replay_speed = speed
        self.start_mode = start or ("run" if replay else "profiles")
        self.run_screen = RunScreen(services)
        """The Run screen (kept so runs and replays can be started from other screens)."""
        self.add_mode("profiles", lambda: ProfilesScreen(services))
        self.add_mode("prices", lambda: PricesScreen(services))
        self.add_mode("run", lambda: self.run_screen)
        self.runs_screen = RunsScreen(services)
        """The Runs screen (told when a run started from here starts or ends)."""
        self.add_mode("runs", lambda: self.runs_screen)
        self.stop_on_signals = False
        """Handle STOP_SIGNALS (set by run_dashboard: the real terminal, not a test pilot)."""
        self.stopping_for: int | None = None
        """The stop signal being handled (None: none came)."""

    async def on_mount(self) -> None:
        if self.stop_on_signals:
            loop = asyncio.get_running_loop()
            for signum in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(signum, self.stop_signal, signum)
        await self.switch_mode(self.start_mode)
        if self.replay_path is not None:
            if self.current_mode != "run":
                await self.switch_mode("run")
            self.run_screen.start_replay(self.replay_path, self.replay_speed)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette (ctrl+p): the screens, then what the keys of the screen under it do now
        (it held only Textual's own commands), then Textual's."""
        for mode, title in SCREENS:
            key = str(MODE_ORDER.index(mode) + 1)
            yield SystemCommand(title, f"go to the {title} screen (key {key})",
                                partial(self.switch_mode, mode))  # fmt: skip
        seen = {"help", "command_palette"}  # help: below, in its own words
        for active in screen.active_bindings.values():
            binding = active.binding
            if not (binding.show and active.enabled) or binding.action in seen:
                continue
            seen.add(binding.action)
            shown = self.get_key_display(binding)
            yield SystemCommand(binding.description, f"key {shown}",
                                partial(self.run_action, binding.action, active.node))  # fmt: skip
        yield SystemCommand("Help", "every key of every screen (key ?)", self.action_help)
        yield from super().get_system_commands(screen)

    # ------------------------------------------------------------------ keys
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_cycle_screen(self, delta: int) -> None:
        if self.screen.is_modal:
            return
        index = MODE_ORDER.index(self.current_mode) if self.current_mode in MODE_ORDER else 0
        await self.switch_mode(MODE_ORDER[(index + delta) % len(MODE_ORDER)])

    async def action_quit(self) -> None:
        """ctrl+q (Textual's own quit key) asks as `q` does."""
        self.action_quit_app()

    def action_quit_app(self) -> None:
        if not self.run_screen.live:
            self.exit(0)
            return
        up = self.run_screen.cloud_resources_up()
        run = self.run_screen.state.run_id or "?"
        if up:
            title = "Cloud resources are still up"
            text = (
                f"{up} cloud node(s) of the running run are still up and costing money. "
                f"Stop the run ({STOP_WORDS}), tear them down and quit?"
            )
        else:
            title = "A run is live"
            text = f"Run {run} is still training. Stop it ({STOP_WORDS}) and quit?"
        self.push_screen(
            ConfirmScreen(title, text, yes="Stop and quit", no="Stay"), self._confirmed_quit
        )

    def _confirmed_quit(self, yes: bool | None) -> None:
        if yes:
            self.notify("stopping the run… the app quits when it has ended")
            self.run_worker(self._stop_then_exit(), exclusive=True, group="quit")

    async def _stop_then_exit(self, code: int = 0) -> None:
        await self.run_screen.stop_and_wait()
        self._exit_for_sure(code)

    def stop_signal(self, signum: int) -> None:
        """SIGTERM, SIGHUP (the terminal closed) or a SIGINT sent from outside: stop a live run
        (a checkpoint at its next step, its nodes torn down) as quitting does, then exit 128 +
        the signal. A second signal meanwhile changes nothing: the stop goes on."""
        if self.stopping_for is not None:
            return
        self.stopping_for = signum
        code = 128 + signum
        if signum == signal.SIGHUP and self.stop_on_signals:
            self._terminal_gone()
        if self.run_screen.live:
            self.run_worker(self._stop_then_exit(code), exclusive=True, group="quit")
        else:
            self._exit_for_sure(code)

    def _terminal_gone(self) -> None:
        """Drop the screen's output from now on: writes to a hung-up terminal fail, Textual's
        writer thread dies of it, and once its queue was full the app blocked for ever in a
        write (the run it was stopping with it, the process left behind at 0 % CPU)."""
        writer = getattr(self._driver, "_writer_thread", None)
        if writer is not None:
            writer.write = lambda text: None
            writer.stop = lambda: None

    def _exit_for_sure(self, code: int) -> None:
        """Exit with ``code``; in a real terminal, a process still there EXIT_WATCHDOG_S
        later (Textual waiting on a terminal that is gone) ends itself."""
        if self.stop_on_signals:
            threading.Thread(target=_exit_later, args=(code,), daemon=True).start()
        self.exit(return_code=code)

    # -------------------------------------------------------------- messages
    async def on_run_requested(self, message: RunRequested) -> None:
        if not self.run_screen.live:
            await self.switch_mode("run")
            self.run_screen.start_live(message.row)
            self.runs_screen.runs_changed()
            return
        row = message.row  # one run at a time: the live one stops only when the user says so
        self.push_screen(
            ConfirmScreen(
                "A run is live",
                f"Run {self.run_screen.state.run_id or '?'} is still running. Stop it "
                f"({STOP_WORDS}, its nodes torn down) and start {row.name}?"
                + (f" It starts {paid}, billed until torn down." if (paid := bills(row)) else ""),
                yes="Stop it and start",
                no="Keep it running",
            ),
            lambda yes: self._confirmed_restart(row, yes),
        )

    def _confirmed_restart(self, row: Any, yes: bool | None) -> None:
        if not yes:
            self.notify("the live run keeps going (s on the Run screen stops it)", markup=False)
            return
        self.run_worker(self._stop_then_start(row), exclusive=True, group="restart")

    async def _stop_then_start(self, row: Any) -> None:
        await self.run_screen.stop_and_wait()
        await self.switch_mode("run")
        self.run_screen.start_live(row)
        self.runs_screen.runs_changed()

    async def on_replay_requested(self, message: ReplayRequested) -> None:
        from tui.replay import check_has_events, events_path

        try:  # none, or no event in it: say so here, not on a Run screen left waiting
            check_has_events(events_path(message.path))
        except SentitopError as exc:  # (the CLI's hint says which folder to pass: one was)
            said = f"{exc.message}: nothing to replay"
            self.push_screen(ErrorScreen(exc.title, readable_text(said)))
            return
        if not self.run_screen.live:
            await self._replay(message.path)
            return
        path = message.path  # the Run screen shows one run: the live one stops only when asked
        self.push_screen(
            ConfirmScreen(
                "A run is live",
                f"Run {self.run_screen.state.run_id or '?'} is still running, and the Run "
                f"screen shows one run at a time. Stop it ({STOP_WORDS}, its nodes torn down) "
                f"and replay {path.name}?",
                yes="Stop it and replay",
                no="Keep it running",
            ),
            lambda yes: self._confirmed_replay(path, yes),
        )

    def _confirmed_replay(self, path: Path, yes: bool | None) -> None:
        if not yes:
            self.notify("the live run keeps going (s on the Run screen stops it)", markup=False)
            return
        self.run_worker(self._stop_then_replay(path), exclusive=True, group="restart")

    async def _stop_then_replay(self, path: Path) -> None:
        await self.run_screen.stop_and_wait()
        self.runs_screen.runs_changed()
        await self._replay(path)

    async def _replay(self, path: Path) -> None:
        await self.switch_mode("run")
        self.run_screen.start_replay(path, 0.0)

    def on_feed_ended(self, message: FeedEnded) -> None:
        """A live run ended (its summary.json is written): the Runs screen looks again."""
        if message.source == "live":
            self.runs_screen.runs_changed()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Failures of the app's own workers (screens forward theirs as WorkerFailed)."""
        if event.state == WorkerState.ERROR:
            self.show_failure(event.worker)

    def on_worker_failed(self, message: WorkerFailed) -> None:
        self.show_failure(message.worker)

    def show_failure(self, worker: Worker[Any]) -> None:
        """The one place worker failures become an error modal."""
        error = worker.error
        if isinstance(error, SentitopError):
            title, text = (
                error.title,
                error.message + (f"\n\nhint: {error.hint}" if error.hint else ""),
            )
        else:
            title, text = (
                f"{worker.name or 'background task'} failed",
                f"{type(error).__name__}: {error}",
            )
        self.push_screen(ErrorScreen(title, readable_text(text)))  # quoted node lines: events


def default_runs_dir() -> Path:
    """$SENTITOP_RUNS_DIR or ./runs (the same folder remote.runner writes to)."""
    return Path(os.environ.get("SENTITOP_RUNS_DIR", "runs")).expanduser()


def make_app(
    *,
    profiles_dir: str | Path | None = None,
    runs_dir: str | Path | None = None,
    replay: str | Path | None = None,
    speed: float = 0.0,
    start: str | None = None,
    services: Services | None = None,
    **overrides: Any,
) -> SentitopApp:
    """Build the dashboard; ``services``/``overrides`` replace back ends (tests pass fakes)."""
    if services is None:
        services = Services(
            profiles_dir=Path(profiles_dir) if profiles_dir is not None else None,
            runs_dir=Path(runs_dir) if runs_dir is not None else default_runs_dir(),
            **overrides,
        )
    return SentitopApp(
        services, replay=Path(replay) if replay is not None else None, speed=speed, start=start
    )


def run_dashboard(**kwargs: Any) -> int:
    """Run the dashboard in this terminal; returns the exit code (128 + the signal when a stop
    signal ended it, after a live run's nodes were torn down)."""
    app = make_app(**kwargs)
    app.stop_on_signals = True
    result = app.run()
    return int(result or app.return_code or 0)
