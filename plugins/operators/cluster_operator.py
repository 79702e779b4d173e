"""The base of every operator that works on one Kafka cluster: its settings resolved against the run's params
(defaults from the one settings table), the cluster's profile, the dry run, and waits that fail the task with
their reason.

Settings are a dict of values or :class:`runtime.params.FromParam` (read from the DAG params at run time, as the
user typed them). :meth:`ClusterOperator.setting` gives a setting's value, or its default from
``runtime.settings_table`` when the run did not set it (absent or null), so no operator writes a default again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import ClusterMode
from runtime import profiles, stopping
from runtime.cluster_mode import run_mode
from runtime.lock_holding import release_held
from runtime.params import is_true, resolve_settings
from runtime.settings_table import value_or_default
from runtime.waiting import Check, WaitAborted, WaitTimeout, call_until_answered, wait_until


class ClusterOperator(BaseOperator):
    """An operator on one Kafka cluster (subclasses call :meth:`resolve` first in ``execute``).

    :param settings: the operator's settings: ``cluster`` (the connection id of the cluster profile) and what the
        operator reads, values or ``FromParam``; ``dry_run``, ``healthcheck_interval_s`` (s) and
        ``healthcheck_timeout_s`` (s) are read by :meth:`resolve` (table defaults when absent).
    """

    def __init__(self, *, settings: dict, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings

    def resolve(self, context: Any) -> dict[str, Any]:
        """Resolve the settings against the run's params; sets ``cfg``, ``dry_run``, ``interval_s`` and
        ``timeout_s``, forgets an earlier profile. Returns ``cfg``.

        :raises KeyError: a setting reads a param the DAG does not define (a DAG authoring error).
        """
        self.cfg = resolve_settings(self.settings, context["params"])
        self._profile: ClusterProfile | None = None
        self._run_mode: ClusterMode | None = None
        self.dry_run = is_true(self.setting("dry_run"))
        self.interval_s = float(self.setting("healthcheck_interval_s"))
        self.timeout_s = float(self.setting("healthcheck_timeout_s"))
        return self.cfg

    def setting(self, name: str) -> Any:
        """The run's value of setting ``name``, or its default (``runtime.settings_table.value_or_default``: when
        absent, or null where null means nothing).

        :raises KeyError: neither set nor a setting of the table.
        """
        return value_or_default(name, self.cfg)

    def on_kill(self) -> None:
        """Airflow's SIGTERM (the task or its run marked, or the task cleared, while it runs): flag the process so
        that its next wait or action raises instead of acting (``runtime.stopping``); SIGKILL follows in 5 s."""
        stopping.request_stop("Airflow sent SIGTERM: the task or its run was marked or cleared while it ran")
        self.log.warning("told to stop from outside: no further action on the cluster from this task")

    def note_line(self, result: Any, dry_run: bool) -> str | None:
        """The run's closing note's line about what this task did, from its return value (XCom) ``result``, read by
        ``run_outcome`` after the task succeeded (``runtime.run_report.done_lines``); None: nothing to say (the
        default). An operator that changes the cluster outside a roll or a plan overrides it (the lines:
        ``kafka_ops.done_lines``)."""
        return None

    @property
    def profile(self) -> ClusterProfile:
        """The cluster's profile, with an SSH connection named (read once per execution).

        :raises AirflowFailException: unknown connection or invalid profile (named; waiting cannot fix it).
        """
        if getattr(self, "_profile", None) is None:
            self._profile = profiles.profile_or_fail(self.cfg["cluster"])
        return self._profile

    def wait(self, check: Callable[[], Check], what: str, *, not_yet: str | None = None,
             ramp_from_s: float | None = None, interval_s: float | None = None, timeout_s: float | None = None,
             sleep: Callable[[float], None] | None = None) -> Check:
        """Poll ``check`` every ``interval_s`` (default ``healthcheck_interval_s``) until it passes or
        ``timeout_s`` (default ``healthcheck_timeout_s``) ends (``runtime.waiting.wait_until``).

        :raises AirflowFailException: the deadline, or a fatal error, with the reason.
        """
        try:
            return wait_until(check, what=what, interval_s=self.interval_s if interval_s is None else interval_s,
                              timeout_s=self.timeout_s if timeout_s is None else timeout_s, log=self.log,
                              not_yet=not_yet, ramp_from_s=ramp_from_s, **({"sleep": sleep} if sleep else {}))
        except (WaitAborted, WaitTimeout) as exc:
            raise AirflowFailException(str(exc)) from exc

    def ask(self, call: Callable[[], Any], what: str, sleep: Callable[[float], None] | None = None) -> Any:
        """``call()``, waiting out transient errors up to ``healthcheck_timeout_s`` (``call_until_answered``).

        :raises AirflowFailException: a fatal error (an AirflowFailException raised by ``call``, re-raised as it is),
            or the deadline, with the reason.
        """
        try:
            return call_until_answered(call, what=what, interval_s=self.interval_s, timeout_s=self.timeout_s,
                                       log=self.log, **({"sleep": sleep} if sleep else {}))
        except (WaitAborted, WaitTimeout) as exc:
            cause = exc.__cause__  # a refusal raised by ``call`` itself is the reason, as it said it (and of its kind:
            if isinstance(cause, AirflowFailException):  # a RunRefused stays one)
                raise cause from exc
            raise AirflowFailException(str(exc)) from exc

    def mode(self, context: Any, admin: Any) -> ClusterMode:
        """The run's cluster mode: decided under the lock, else asked now through ``admin`` (a ``KafkaAdminHook``:
        DescribeQuorum answered = KRaft), transient errors waited out (``runtime.cluster_mode.run_mode``). Read once
        per execution (:meth:`resolve` forgets it): the deciders are other tasks of the run, and a broker task asked
        it up to nine times (an XCom read and a log line each)."""
        if getattr(self, "_run_mode", None) is None:
            self._run_mode = run_mode(context, lambda: self.ask(admin.is_kraft, "the cluster's mode (DescribeQuorum)"),
                                      self.log)
        return self._run_mode

    @contextmanager
    def releasing_lock_on_failure(self, context: Any, why: str) -> Iterator[None]:
        """Run the body; when it fails, release the cluster lock if this run holds it (``why`` is logged), then
        re-raise. A task that acts on the cluster re-takes the lock when it finds it free (``ensure_held``: a run
        resumed by clearing only its failed tasks), and such a run's ``run_outcome`` teardown, which succeeded
        before, does not run again: the failing task is the last one that can release it. A dry run holds no lock.
        """
        try:
            yield
        except BaseException:
            profile = None
            if getattr(self, "cfg", None) is not None and not self.dry_run:
                try:
                    profile = self.profile
                except Exception:  # noqa: BLE001, S110 - no profile: no lock this task could have taken
                    pass
            if profile is not None:
                release_held(profile, context, self.log, why)
            raise
