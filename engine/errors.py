"""Exception hierarchy: one base with a user-facing title, one subclass per area."""

from __future__ import annotations


class SentitopError(Exception):
    """Base of every error sentitop reports to a user (never shown as a traceback)."""

    title = "sentitop error"
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def user_message(self) -> str:
        """One or two lines for the terminal: title, message and what to do (control
        characters from file names or process output shown escaped, never acted on)."""
        text = f"{self.title}: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return visible(text)


_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if c not in (9, 10)}
"""Control characters (C0 but tab and newline, DEL, C1) → their escape: a file name holding
ESC [2J cleared the terminal when an error named it."""


def visible(text: str) -> str:
    """``text`` with every control character but tab and newline written as \\xNN."""
    return text.translate(_CONTROLS)


class InputError(SentitopError):
    """A missing, unreadable or invalid input file or argument."""

    title = "bad input"
    exit_code = 2


class ConfigError(SentitopError):
    """An invalid configuration value (names the field and what is allowed)."""

    title = "bad configuration"
    exit_code = 2


class DatasetError(SentitopError):
    """A dataset folder that is missing, incomplete or of an unknown format version."""

    title = "bad dataset"
    exit_code = 2


class TrainError(SentitopError):
    """Training failed on some rank."""

    title = "training failed"


class DivergedError(TrainError):
    """The loss or the weights stopped being finite numbers: the run cannot go on."""

    title = "training diverged"


class LaunchError(SentitopError):
    """Starting or supervising processes on nodes failed."""

    title = "launch failed"
    rank_exit: int | None = None
    """The failed rank's exit status, where one rank's failure ended the launch."""
    leftovers: bool = False
    """True when the run's cloud machines could not be terminated (they may still bill)."""

    def after(self, first: BaseException) -> LaunchError:
        """This teardown failure, saying too what failed first (else only the teardown's
        message reached the user and the reason the run stopped was lost)."""
        said = first.message if isinstance(first, SentitopError) else str(first)
        said = said or type(first).__name__
        error = LaunchError(f"{self.message}; it was tearing down after: {said}", hint=self.hint)
        error.leftovers, error.rank_exit = self.leftovers, self.rank_exit
        return error


class ProfileError(SentitopError):
    """A profile file that does not validate (names file, field and what is allowed)."""

    title = "bad profile"
    exit_code = 2


class BudgetError(SentitopError):
    """A run that would exceed its budget (refused before it launches: the profile's budget
    settings, exit 2)."""

    title = "budget exceeded"
    exit_code = 2


class CloudError(SentitopError):
    """A cloud API call failed (EC2, EMR, S3, Pricing)."""

    title = "cloud error"


class StorageError(SentitopError):
    """A disk that is full or fails while writing scratch or output files (names the folder)."""

    title = "disk problem"


PEER_LOST_MARKS = (
    "connection reset by peer",
    "connection closed by peer",
    "broken pipe",
    "rendezvousclosederror",
    "rendezvousconnectionerror",
    "remote process exited",
    "distnetworkerror",
)
"""Output that marks a node failing because another node went away (so not the root cause)."""


def peer_lost(text: str) -> bool:
    """True when ``text`` (a rank's error or output) says another node went away."""
    lowered = text.lower()
    return any(mark in lowered for mark in PEER_LOST_MARKS)
