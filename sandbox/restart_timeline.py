"""Kafka's own time for each broker restart, read from the sandbox nodes' logs (:mod:`sandbox.node_log`).

What a roll's tasks measure (``stop_sent`` -> gone from the metadata, and so on) includes their poll latency and
SSH commands; this is what Kafka itself spent, from its own log lines, so a bench can set the orchestration's
overhead beside it:

- shutdown: ``shutting down`` -> ``shut down completed`` (controlled shutdown: the controller moves the broker's
  leaderships away, then every component closes);
- start: the JVM launched (``kafka-service``'s marker) -> ``started`` (ZooKeeper mode: registered; KRaft: unfenced);
- catch-up: ``started`` -> the last ISR change that includes the broker (a leader's ``ISR updated to``) before the
  next broker's shutdown began: the broker back in every ISR. For brokers restarted together (a batch) the ISR
  changes of one include the others once they are back, so each member's catch-up ends with the batch's;
- leadership: the last time the broker became a partition's leader (``[Broker id=N] Leader P …``, a preferred
  leader election) in the same window.

Times are epoch seconds (Kafka's log timestamps, local time); durations seconds; None where a line is missing
(a broker not restarted again, a log rotated away); :func:`batch_summary` turns restarts into phase seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sandbox import node_log
from sandbox.layout import Workdir


@dataclass(frozen=True)
class KafkaRestart:
    """One restart of broker ``broker`` as Kafka logged it (epoch seconds; see the module docstring)."""

    broker: int
    shutdown_begun: float
    shut_down: float | None
    launched: float | None
    started: float | None
    caught_up: float | None
    leading: float | None


def restarts_of(logs: Mapping[int, str], since: float, until: float = float("inf")) -> list[KafkaRestart]:
    """Every broker restart whose shutdown began between ``since`` and ``until`` (epoch seconds), in shutdown
    order; its catch-up and leadership are looked for until the next shutdown of any broker or ``until``, whichever
    comes first (a caller passes when its roll was done with these brokers: a later gate's leader election would
    count otherwise).

    :param logs: broker id -> the text of its node log (every broker's: the ISR changes a restarted broker's
        catch-up ends with are logged by the partitions' leaders).
    """
    runs = {b: node_log.runs_of_text(text) for b, text in logs.items()}
    updates = sorted((u for text in logs.values() for u in node_log.isr_updates_of_text(text)), key=lambda u: u.at)
    leads = {b: node_log.leader_starts_of_text(text) for b, text in logs.items()}
    shutdowns = sorted(r.shutdown for history in runs.values() for r in history if r.shutdown is not None)
    found = []
    for broker, history in runs.items():
        for i, run in enumerate(history):
            if run.shutdown is None or not since <= run.shutdown <= until:
                continue
            following = history[i + 1] if i + 1 < len(history) else None
            started = following.started if following else None
            caught_up = leading = None
            if started is not None:
                end = min(until, next((s for s in shutdowns if s > started), until))
                caught_up = _last(u.at for u in updates if started <= u.at <= end and broker in u.isr)
                leading = _last((at for at, node, _ in leads[broker] if node == broker and started <= at <= end))
            found.append(KafkaRestart(broker, run.shutdown, run.stopped, following.began if following else None,
                                      started, caught_up, leading))
    return sorted(found, key=lambda r: r.shutdown_begun)


def _last(times: Iterable[float]) -> float | None:
    return max(times, default=None)


def read_logs(workdir: Workdir, brokers: Iterable[int]) -> dict[int, str]:
    """Broker id -> the text of its node log in the sandbox ``workdir`` (read once: a caller asks
    :func:`restarts_of` for each batch of a roll); a broker without a log is left out."""
    logs = {}
    for broker in brokers:
        try:
            logs[broker] = workdir.host(broker).server_log.read_text(errors="replace")
        except FileNotFoundError:
            continue
    return logs


def batch_summary(found: list[KafkaRestart], brokers: Iterable[int]) -> dict[str, float | None]:
    """Kafka's own seconds for brokers restarted together (their latest restarts in ``found``):
    ``{"shutdown_s", "down_s", "start_s", "catch_up_s", "leadership_s", "kafka_s"}``, each phase from its first
    broker's beginning to its last broker's end: shutdown (first ``shutting down`` -> last ``shut down
    completed``), down (the last exit -> the first launch: the orchestration's), start (first launch -> last
    ``started``), catch-up (last ``started`` -> last ISR join), leadership (back in every ISR -> the last leader
    start, 0 when it came earlier); ``kafka_s`` = shutdown + start + catch-up + leadership. A phase is None when a
    broker lacks its line; ``kafka_s`` then is None too."""
    wanted = set(brokers)
    latest: dict[int, KafkaRestart] = {}
    for r in found:
        if r.broker in wanted:
            latest[r.broker] = r
    if not latest or set(latest) != wanted:
        return dict.fromkeys(("shutdown_s", "down_s", "start_s", "catch_up_s", "leadership_s", "kafka_s"))
    rs = list(latest.values())

    def span(first: list[float | None], last: list[float | None]) -> float | None:
        """From the earliest of ``first`` to the latest of ``last``; None when a time is missing."""
        if any(t is None for t in first + last):
            return None
        return max(last) - min(first)

    shutdown = span([r.shutdown_begun for r in rs], [r.shut_down for r in rs])
    exits, launches = [r.shut_down for r in rs], [r.launched for r in rs]
    down = None if None in exits or None in launches else min(launches) - max(exits)
    start = span(launches, [r.started for r in rs])
    catch_up = leadership = None
    if all(r.started is not None for r in rs):
        last_started = max(r.started for r in rs)
        back = max([last_started, *(r.caught_up for r in rs if r.caught_up is not None)])
        catch_up = back - last_started
        leads = [r.leading for r in rs if r.leading is not None]
        leadership = max(0.0, max(leads) - back) if leads else 0.0
    phases = (shutdown, start, catch_up, leadership)
    return {"shutdown_s": shutdown, "down_s": down, "start_s": start, "catch_up_s": catch_up,
            "leadership_s": leadership, "kafka_s": None if None in phases else sum(phases)}
