"""Maintenance windows: a cron expression for when a window opens, plus how long it stays open.

"Sat 02:00, 4 h" is ``MaintenanceWindow("0 2 * * 6", 4 * 3600, "Europe/Berlin")``. The cron expression is
read in the window's time zone (so a window follows daylight-saving changes the way the operators' wall
clock does), with croniter's five-field syntax (the one Airflow's cron timetables use). A window opened at
``t`` is open on ``[t, t + duration)``; windows may overlap (a duration longer than the gap between two
openings), then they merge.

Pure time arithmetic: no Airflow, no clock of its own (every function takes the instant it judges).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

#: Longest accepted window, seconds (one week: a weekly window may be up to a week long).
MAX_DURATION_S = 7 * 24 * 3600


class WindowError(ValueError):
    """A malformed window: the message names the field and the value."""


@dataclass(frozen=True)
class MaintenanceWindow:
    """Windows that open at every ``cron`` time (in ``timezone``) and last ``duration_s`` seconds.

    :raises WindowError: a cron expression croniter cannot read (or with seconds / years: six or more
        fields), a duration not in (0, one week], an unknown time zone.
    """

    cron: str
    duration_s: float
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.cron, str) or len(self.cron.split()) != 5 or not croniter.is_valid(self.cron):
            raise WindowError(f"maintenance window cron {self.cron!r}: not a five-field cron expression "
                              "(minute hour day-of-month month day-of-week)")
        try:
            duration = float(self.duration_s)
        except (TypeError, ValueError):
            raise WindowError(f"maintenance window duration {self.duration_s!r}: not a number of seconds") from None
        if not 0 < duration <= MAX_DURATION_S:
            raise WindowError(f"maintenance window duration {self.duration_s!r} s: must be more than 0 and at "
                              f"most {MAX_DURATION_S} s (one week)")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise WindowError(f"maintenance window time zone {self.timezone!r}: unknown (use an IANA name "
                              "such as 'UTC' or 'Europe/Berlin')") from None

    @property
    def duration(self) -> timedelta:
        return timedelta(seconds=float(self.duration_s))

    def _zoned(self, at: datetime) -> datetime:
        if at.tzinfo is None:
            raise WindowError("an instant without a time zone cannot be judged against a window")
        return at.astimezone(ZoneInfo(self.timezone))

    def opening_before(self, at: datetime) -> datetime:
        """The latest opening at or before ``at`` (aware datetime, UTC)."""
        zoned = self._zoned(at)
        minute = zoned.replace(second=0, microsecond=0)
        if croniter.match(self.cron, minute):
            return minute.astimezone(UTC)
        return croniter(self.cron, zoned).get_prev(datetime).astimezone(UTC)

    def opening_after(self, at: datetime) -> datetime:
        """The first opening strictly after ``at`` (aware datetime, UTC)."""
        return croniter(self.cron, self._zoned(at)).get_next(datetime).astimezone(UTC)

    def window_at(self, at: datetime) -> tuple[datetime, datetime] | None:
        """``(opened, closes)`` (UTC) of the window open at ``at``, or None. The latest opening decides (an
        earlier one ends earlier); windows that overlap the next opening merge into one (bounded search)."""
        opened = self.opening_before(at)
        end = opened + self.duration
        if at >= end:
            return None
        for _ in range(10_000):
            later = self.opening_after(end - timedelta(microseconds=1))
            if later > end or end - opened > timedelta(seconds=2 * MAX_DURATION_S):
                break
            end = later + self.duration
        return opened, end

    def is_open(self, at: datetime) -> bool:
        """Whether a window is open at ``at``."""
        return self.window_at(at) is not None

    def next_open(self, at: datetime) -> datetime:
        """``at`` itself when a window is open then, otherwise the next opening (UTC)."""
        return at if self.is_open(at) else self.opening_after(at)

    def describe(self) -> str:
        """"cron '0 2 * * 6' (Europe/Berlin), 4 h 0 min" for logs and the DAG's schedule summary."""
        minutes = round(float(self.duration_s) / 60)
        length = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else (
            f"{minutes} min" if minutes else f"{float(self.duration_s):.0f} s")
        return f"cron {self.cron!r} ({self.timezone}), {length}"


@dataclass(frozen=True)
class WindowVerdict:
    """What the window says at one instant: ``open``; ``closes`` (UTC) when open; ``opens`` (UTC) when
    closed; ``message`` names the window and the times."""

    open: bool
    message: str
    closes: datetime | None = None
    opens: datetime | None = None


def judge(window: MaintenanceWindow, at: datetime) -> WindowVerdict:
    """Judge ``at`` against ``window`` (see :class:`WindowVerdict`)."""
    current = window.window_at(at)
    if current is not None:
        return WindowVerdict(True, f"inside the maintenance window ({window.describe()}): it closes at "
                                   f"{_clock(current[1])}", closes=current[1])
    opens = window.opening_after(at)
    wait = opens - at
    return WindowVerdict(False, f"outside the maintenance window ({window.describe()}): the next one opens at "
                                f"{_clock(opens)}, in {_span(wait)}", opens=opens)


def _clock(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(d: timedelta) -> str:
    s = max(0, int(d.total_seconds()))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"
