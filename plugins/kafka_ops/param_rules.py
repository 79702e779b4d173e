"""Param combinations that can never pass, refused before the lock (``check_and_lock``) instead of failing a gate
on a healthy cluster later.

- A wait polls every ``healthcheck_interval_s`` until ``healthcheck_timeout_s``: an interval longer than the
  timeout leaves one poll, and the lag gate's ``lag_ok_consecutive`` OK answers in a row (Burrow's status of each
  watched group, one answer per poll) need ``(lag_ok_consecutive - 1) * healthcheck_interval_s`` seconds at least,
  plus Burrow's own answers: a timeout not above that fails on a healthy cluster (3 polls 5 s apart took about
  13 s on the sandbox; a 10 s timeout failed broker 0's gate).
- A wave polls every ``verify_interval_s`` until ``verify_timeout_s``: the interval must not exceed the timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def impossible_combinations(values: Mapping[str, Any]) -> list[str]:
    """One message per combination of ``values`` (the run's params that its DAG has, defaults filled in; numbers
    in seconds) that cannot pass. A rule whose params the DAG does not have is not checked; the lag rule only
    when the run has a lag gate (``consumer_groups`` not null)."""
    out = []
    interval, timeout = values.get("healthcheck_interval_s"), values.get("healthcheck_timeout_s")
    if _numbers(interval, timeout) and interval > timeout:
        out.append(f"healthcheck_interval_s {interval} is longer than healthcheck_timeout_s {timeout}: a wait would "
                   "poll once; lower the interval or raise the timeout")
    ok_polls = values.get("lag_ok_consecutive")
    if "consumer_groups" in values and values["consumer_groups"] is not None and _numbers(interval, timeout, ok_polls):
        need = (ok_polls - 1) * interval
        if ok_polls > 1 and timeout <= need:
            out.append(f"healthcheck_timeout_s {timeout} cannot pass the lag gate: lag_ok_consecutive {ok_polls} OK "
                       f"polls of Burrow, healthcheck_interval_s {interval} s apart, take more than {need} s; raise "
                       f"healthcheck_timeout_s above {need} (with room for the cluster to recover) or lower "
                       "lag_ok_consecutive or healthcheck_interval_s")
    verify_interval, verify_timeout = values.get("verify_interval_s"), values.get("verify_timeout_s")
    if _numbers(verify_interval, verify_timeout) and verify_interval > verify_timeout:
        out.append(f"verify_interval_s {verify_interval} is longer than verify_timeout_s {verify_timeout}: a wave "
                   "would be checked once; lower the interval or raise the timeout")
    return out


def _numbers(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
