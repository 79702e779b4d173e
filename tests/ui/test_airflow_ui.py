"""The Airflow UI in a real browser: trigger ``kafka_rolling_restart`` through its Trigger form, follow the run
in the Grid, read labels and logs from the page, and cross-check each with the REST API.

Runs against the session's ``airflow standalone`` and sandbox (``tests/ui/conftest.py``). Screenshots land in
each test's ``tmp_path`` (their paths are printed; ``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from playwright.sync_api import expect
from ui_standalone import DAG_ID, REPO, RunningAirflow, UiTestError, time_left_s, wait_until

from demo.rest import AirflowApiError, AirflowClient

pytestmark = [pytest.mark.ui, pytest.mark.sandbox]

RUN_TIMEOUT_S = 600  # a dry run of 3 brokers takes ~30 s on an idle machine; a loaded one is much slower
LABEL = re.compile(r"^broker (\d+) \((\d+)/(\d+)\) · dry run$")


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    """A screenshot of the page into the test's output directory (path printed)."""
    path = tmp_path / f"{name}.png"
    page.mouse.move(800, 995)  # no tooltip of a hovered Grid cell over the page
    page.screenshot(path=str(path), animations="disabled")  # no half-open accordion or fading dialog
    print(f"screenshot: {path}")
    return path


def open_trigger_form(page: Any, dag_id: str = DAG_ID) -> Any:
    """From the Dags list, open ``dag_id`` and its Trigger form; returns the dialog."""
    page.goto("/dags")
    page.get_by_role("link", name=dag_id, exact=True).click()
    page.wait_for_url(f"**/dags/{dag_id}")
    # the DAG's own page is rendered (the URL changes first; the list's cards have "Trigger Dag" buttons too)
    page.get_by_role("link", name="Overview", exact=True).wait_for()
    page.get_by_role("button", name="Trigger Dag").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("heading", name=f"Trigger Dag - {dag_id}").wait_for()
    dialog.get_by_role("checkbox", name="dry_run").wait_for(state="attached")  # the params form is rendered
    return dialog


def submit(page: Any, dialog: Any, dag_id: str = DAG_ID) -> str:
    """Click Trigger; returns the new run's id (the UI navigates to the run's page)."""
    button = dialog.get_by_role("button", name="Trigger", exact=True)
    expect(button, "the Trigger button stays disabled").to_be_enabled()
    button.click()
    page.wait_for_url(re.compile(rf"/dags/{dag_id}/runs/[^/]+/?$"))
    return unquote(page.url.split("/runs/", 1)[1].strip("/"))


def wait_for_run(client: AirflowClient, run_id: str, dag_id: str = DAG_ID,
                 timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Poll the REST API until the run ends (success or failed); returns it. API hiccups are retried.

    A run still going after ``timeout_s`` seconds (or a minute before the test's pytest-timeout) is marked failed
    over REST (its teardown then releases the cluster lock: later tests on the session's sandbox do not wait behind
    it) and :class:`UiTestError` names its unfinished task instances with the last log lines of each (what the run
    was waiting for)."""
    def ended() -> dict[str, Any] | None:
        try:
            run = client.get_run(dag_id, run_id)
        except AirflowApiError:
            return None
        return run if run["state"] in ("success", "failed") else None

    t0 = time.monotonic()
    try:
        run = wait_until(f"run {run_id} to end", max(30.0, min(timeout_s, time_left_s())), ended, poll_s=2.0)
    except UiTestError as exc:
        try:
            where = unsuccessful(client, run_id, dag_id)
        except Exception as read_exc:  # noqa: BLE001 - the timeout is the failure to report
            where = f"(could not read the run's task instances: {read_exc})"
        try:
            client.request("PATCH", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}", json={"state": "failed"})
        except Exception as mark_exc:  # noqa: BLE001
            where += f"\n(could not mark run {run_id} failed: {mark_exc})"
        raise UiTestError(f"{exc}; marked failed; where it was:\n{where}") from exc
    print(f"run {run_id} {run['state']} after {time.monotonic() - t0:.0f} s of polling")
    return run


def states(client: AirflowClient, run_id: str, dag_id: str = DAG_ID) -> dict[tuple[str, int], dict[str, Any]]:
    return {(ti["task_id"], ti["map_index"]): ti for ti in client.task_instances(dag_id, run_id)}


def unsuccessful(client: AirflowClient, run_id: str, dag_id: str = DAG_ID, log_lines: int = 25) -> str:
    """What an operator opens after a failed run: every task instance not in success or skipped with its
    state, and the last ``log_lines`` events of each failed or still unfinished one's latest try (the assertion
    message of a run that should have succeeded; the CI summary keeps only the message)."""
    out = []
    for (task_id, index), ti in sorted(states(client, run_id, dag_id).items()):
        if ti["state"] in ("success", "skipped"):
            continue
        out.append(f"{task_id}[{index}]: {ti['state']}")
        if ti["state"] in ("failed", "upstream_failed", "running", "up_for_retry", "up_for_reschedule",
                           "deferred", "awaiting_input") and ti.get("try_number"):
            events = client.task_log(dag_id, run_id, task_id, ti["try_number"], index)
            out += [f"    {e.get('level', '')} {e.get('event', '')}" for e in events[-log_lines:]]
    out += audit_events(client, run_id, dag_id)
    return "\n".join(out)


def audit_events(client: AirflowClient, run_id: str, dag_id: str) -> list[str]:
    """The run's audit log (REST ``/eventLogs``) apart from the UI's own reads: where the scheduler says why it
    failed a task that never logged a failure itself (``state mismatch``: the executor reported the task's
    process finished while the task instance said queued or running)."""
    try:
        logs = client.request("GET", "/eventLogs", params={"dag_id": dag_id, "run_id": run_id, "limit": 100,
                                                           "order_by": "when"}).get("event_logs", [])
    except Exception as exc:  # noqa: BLE001 - a diagnostic of a failure already being reported
        return [f"(audit log unreadable: {exc})"]
    return [f"  audit {e.get('when')} {e.get('event')} {e.get('task_id') or ''}[{e.get('map_index')}]: "
            f"{(e.get('extra') or '')[:600]}" for e in logs if not str(e.get("event", "")).startswith("get_")]


def open_run_grid(page: Any, run_id: str) -> None:
    """The run's page with every task group of the Grid expanded. Once in a few runs the Grid's toolbar came
    up without its expand/collapse buttons (seen after a failed run, under load): the page is loaded again
    then, up to three times."""
    expand = page.get_by_role("button", name="Expand all task groups")
    for attempt in range(1, 4):
        page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
        try:
            expand.click(timeout=20_000)
            return
        except Exception:  # playwright's TimeoutError
            if attempt == 3:
                raise
            print(f"the Grid has no 'Expand all task groups' button (attempt {attempt}); loading the page again")


def grid_cell(page: Any, run_id: str, task_path: str) -> Any:
    """The Grid's cell of ``task_path`` (e.g. ``restart.plan``, ``restart.broker/mapped``) in the run's column.
    The cells are links without a name, so they are found by their target."""
    return page.locator(f'a[href$="/runs/{run_id}/tasks/{task_path}"]').first


def test_trigger_form_dry_run_labels_every_broker(
    page: Any, airflow_ui: RunningAirflow, sandbox: Any, tmp_path: Path
) -> None:
    dialog = open_trigger_form(page)
    trigger = dialog.get_by_role("button", name="Trigger", exact=True)
    expect(trigger, "the Trigger form does not submit with its defaults").to_be_enabled()
    dry_run = dialog.get_by_role("checkbox", name="dry_run")
    assert not dry_run.is_checked()
    dry_run.locator("xpath=..").click()  # the switch: the input is visually hidden inside its label
    assert dry_run.is_checked()
    dry_run.scroll_into_view_if_needed()
    shot(page, tmp_path, "trigger-form-dry-run")
    run_id = submit(page, dialog)

    client = airflow_ui.client
    details = client.request("GET", f"/dags/{DAG_ID}/details")
    defaults = {name: param["value"] for name, param in details["params"].items()}
    run = client.get_run(DAG_ID, run_id)
    assert run["conf"] == {**defaults, "dry_run": True}, "the form sent more than dry_run"

    run = wait_for_run(client, run_id)
    tis = states(client, run_id)
    assert run["state"] == "success", unsuccessful(client, run_id)

    # the run's note: its summary, written by the teardown through the REST API as the kafka-ops service user
    note = wait_until("the run's note", 30, lambda: client.get_run(DAG_ID, run_id).get("note"))
    # its outcome on the first line (the run header shows it), then a Markdown list
    assert note.startswith("**Succeeded**: rolling restart on kafka_sandbox (DRY RUN: nothing was touched)\n\n- "), note
    assert "\n- cluster kafka_sandbox: brokers down none" in note and "\n- roll 'restart': dry run" in note, note
    # which map index is which broker is in the note only while a run may be cleared (`airflow tasks clear -m`):
    # a run that succeeded leaves the room to what it did (the Grid labels say it too)
    assert "map index" not in note, note
    open_run_grid(page, run_id)
    expect(page.get_by_text("rolling restart on kafka_sandbox (DRY RUN: nothing was touched)").first).to_be_visible(
        timeout=20_000)
    shot(page, tmp_path, "run-note")
    grid_cell(page, run_id, "restart.broker/mapped").click()
    page.wait_for_url("**/tasks/restart.broker/mapped")
    brokers = sandbox.registered_brokers()
    # the mapped task's page (the URL changes before it renders): "restart.broker [<count>]"
    page.get_by_role("heading", name=f"restart.broker [{len(brokers)}]").wait_for()
    label_cells = page.get_by_role("table").get_by_role("cell").filter(has_text=re.compile(r"^broker \d+ "))
    wait_until(f"{len(brokers)} broker labels in the mapped instances list", 60,
               lambda: label_cells.count() == len(brokers), poll_s=0.5)
    shot(page, tmp_path, "grid-mapped-brokers")

    ui_labels: dict[int, str] = {}
    for cell in label_cells.all():
        href = cell.get_by_role("link").get_attribute("href") or ""
        ui_labels[int(href.rsplit("/", 1)[1])] = cell.inner_text().strip()
    parsed = {index: LABEL.match(text) for index, text in ui_labels.items()}
    assert all(parsed.values()), f"labels not 'broker <id> (<n>/<total>) · dry run': {ui_labels}"
    assert sorted(int(m[1]) for m in parsed.values()) == sorted(brokers), ui_labels
    assert {index: (int(m[2]), int(m[3])) for index, m in parsed.items()} == {
        index: (index + 1, len(brokers)) for index in range(len(brokers))
    }, ui_labels

    api_labels = {ti["map_index"]: ti["rendered_map_index"] for (task, _), ti in tis.items()
                  if task == "restart.broker"}
    assert api_labels == ui_labels
    assert all(tis[("restart.broker", index)]["state"] == "success" for index in ui_labels)


def type_brokers(page: Any, dialog: Any, text: str) -> None:
    """Replace the brokers param's text (a JSON array is a Monaco editor in the form)."""
    brokers_field = dialog.get_by_role("group").filter(has=page.locator("label", has_text=re.compile(r"^brokers")))
    brokers_field.get_by_role("textbox", name="Editor content").wait_for(state="attached")
    brokers_field.get_by_role("code").click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Backspace")
    page.keyboard.insert_text(text)
    wanted = re.sub(r"\s", "", text)
    wait_until(f"the brokers editor to hold {text}", 30,
               lambda: re.sub(r"\s", "", brokers_field.get_by_role("code").inner_text()).endswith(wanted), poll_s=0.3)


def test_unknown_broker_fails_the_plan_with_its_log(page: Any, airflow_ui: RunningAirflow, tmp_path: Path) -> None:
    dialog = open_trigger_form(page)
    type_brokers(page, dialog, "[77]")
    shot(page, tmp_path, "trigger-form-brokers-77")
    dialog.get_by_role("button", name="Advanced Options").click()
    conf_editor = dialog.get_by_role("region", name="Advanced Options").get_by_role("code")
    wait_until('the Configuration JSON to show "brokers": [77]', 30,
               lambda: re.search(r'"brokers":\[77\]', re.sub(r"\s", "", conf_editor.inner_text())), poll_s=0.3)
    conf_editor.scroll_into_view_if_needed()
    shot(page, tmp_path, "trigger-form-conf-json")
    run_id = submit(page, dialog)

    client = airflow_ui.client
    assert client.get_run(DAG_ID, run_id)["conf"]["brokers"] == [77]
    run = wait_for_run(client, run_id)
    tis = states(client, run_id)
    failed = sorted(task for (task, _), ti in tis.items() if ti["state"] == "failed")
    assert run["state"] == "failed" and failed == ["restart.plan", "run_outcome"], \
        {k: ti["state"] for k, ti in tis.items()}
    note = wait_until("the run's note", 30, lambda: client.get_run(DAG_ID, run_id).get("note"))
    assert note.startswith("**Refused**: rolling restart on kafka_sandbox: restart.plan: "), note
    assert "unknown broker ids [77]" in note.splitlines()[0] and "trigger a new run" in note, note

    open_run_grid(page, run_id)
    grid_cell(page, run_id, "restart.plan").click()
    page.wait_for_url("**/tasks/restart.plan")
    page.get_by_role("heading", name="restart.plan").wait_for()
    page.get_by_role("link", name="Logs", exact=True).click()
    message = page.get_by_text("unknown broker ids [77]").first
    try:
        message.wait_for()
    except Exception as exc:
        shot(page, tmp_path, "plan-log-missing-message")
        raise UiTestError(f"the log view of restart.plan does not show 'unknown broker ids [77]': {exc}") from exc
    shot(page, tmp_path, "grid-plan-log")

    plan = tis[("restart.plan", -1)]
    log = client.task_log(DAG_ID, run_id, "restart.plan", plan["try_number"], -1)
    assert_one_plain_failure_line(log, "unknown broker ids [77]")


def test_a_negative_timeout_typed_in_the_form_and_a_typo_are_refused_with_a_note_naming_both(
    page: Any, airflow_ui: RunningAirflow, sandbox: Any, tmp_path: Path
) -> None:
    """-5 typed into the ``healthcheck_timeout_s`` field stays -5 (no bounds in the form's schema, so no clamping)
    and reaches the run as typed, as does a misspelt key added in the conf JSON; ``check_and_lock`` refuses both in
    one line, before it asks for the lock, and the note (shown on the run's page) names both and advises a new run."""
    dialog = open_trigger_form(page)
    timeout = dialog.get_by_role("spinbutton", name="healthcheck_timeout_s")
    timeout.fill("-5")
    timeout.press("Tab")
    expect(timeout, "the form changed the number").to_have_value("-5")
    shot(page, tmp_path, "trigger-form-timeout-minus-5")
    dialog.get_by_role("button", name="Advanced Options").click()
    conf_editor = dialog.get_by_role("region", name="Advanced Options").get_by_role("code")
    wait_until('the Configuration JSON to show "healthcheck_timeout_s": -5', 30,
               lambda: '"healthcheck_timeout_s":-5' in re.sub(r"\s", "", conf_editor.inner_text()), poll_s=0.3)
    conf_editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Backspace")
    page.keyboard.insert_text(json.dumps({"cluster": "kafka_sandbox", "healthcheck_timeout_s": -5, "brokerz": [1]}))
    wait_until('the Configuration JSON to hold "brokerz"', 30,
               lambda: '"brokerz":[1]' in re.sub(r"\s", "", conf_editor.inner_text()), poll_s=0.3)
    shot(page, tmp_path, "trigger-form-conf-typo")
    starts_before = sandbox.starts(sandbox.registered_brokers())
    run_id = submit(page, dialog)

    client = airflow_ui.client
    conf = client.get_run(DAG_ID, run_id)["conf"]
    assert conf["healthcheck_timeout_s"] == -5 and conf["brokerz"] == [1], conf
    run = wait_for_run(client, run_id)
    tis = states(client, run_id)
    failed = sorted(task for (task, _), ti in tis.items() if ti["state"] == "failed")
    assert run["state"] == "failed" and failed == ["check_and_lock", "run_outcome"], \
        {k: ti["state"] for k, ti in tis.items()}
    note = wait_until("the run's note", 30, lambda: client.get_run(DAG_ID, run_id).get("note"))
    assert "cluster lock: never taken (check_and_lock refused the run first)" in note, "refused before the lock"
    first = note.splitlines()[0]
    assert first.startswith("**Refused**: rolling restart on kafka_sandbox: check_and_lock: "), note
    assert "'brokerz'" in first and "did you mean 'brokers'" in first, note
    assert "healthcheck_timeout_s: -5 is less than the minimum of 10" in first and "trigger a new run" in note, note
    assert_one_plain_failure_line(
        client.task_log(DAG_ID, run_id, "check_and_lock", tis[("check_and_lock", -1)]["try_number"], -1), "'brokerz'")
    open_run_grid(page, run_id)
    expect(page.get_by_text("healthcheck_timeout_s: -5 is less than the minimum of 10").first).to_be_visible(
        timeout=20_000)
    shot(page, tmp_path, "run-note-refused-params")
    assert sandbox.starts(sandbox.registered_brokers()) == starts_before, "nothing was touched"


def assert_one_plain_failure_line(log: list[dict[str, Any]], reason: str) -> None:
    """A refusal's task log (the worker's real Task SDK process): one ERROR line ``Task failed: <reason>``, no
    traceback (``error_detail``) anywhere, and no library chatter (kazoo, kafka-python, paramiko) at INFO."""
    failed = [str(e.get("event")) for e in log if e.get("level") == "error"
              and str(e.get("event", "")).startswith("Task failed")]
    assert len(failed) == 1 and failed[0].startswith("Task failed: ") and reason in failed[0], failed
    assert not [e for e in log if "error_detail" in e or "Traceback" in str(e.get("event", ""))], \
        [e for e in log if "error_detail" in e][:2]
    chatter = [e for e in log if str(e.get("logger", "")).split(".")[0] in ("kazoo", "kafka", "paramiko")
               and e.get("level") in ("debug", "info")]
    assert not chatter, chatter[:5]


def test_decommission_form_needs_brokers_and_refuses_too_many(
    page: Any, airflow_ui: RunningAirflow, sandbox: Any, tmp_path: Path
) -> None:
    """kafka_decommission from its Trigger form: it cannot be submitted without brokers; draining two of the
    sandbox's three brokers (RF 3 topics) is refused by ``validate`` before anything is touched."""
    dag_id = "kafka_decommission"
    client = airflow_ui.client
    wait_until(f"the DAG {dag_id} to be parsed", 120, lambda: client.get_dag(dag_id), poll_s=2.0)
    client.set_paused(dag_id, False)
    dialog = open_trigger_form(page, dag_id)
    trigger = dialog.get_by_role("button", name="Trigger", exact=True)
    expect(trigger, "the form submits without brokers").to_be_disabled()
    shot(page, tmp_path, "decommission-form-no-brokers")
    type_brokers(page, dialog, "[1, 2]")
    run_id = submit(page, dialog, dag_id)
    assert client.get_run(dag_id, run_id)["conf"]["brokers"] == [1, 2]
    run = wait_for_run(client, run_id, dag_id)
    tis = states(client, run_id, dag_id)
    failed = sorted(task for (task, _), ti in tis.items() if ti["state"] == "failed")
    assert run["state"] == "failed" and failed == ["run_outcome", "validate"], {k: ti["state"] for k, ti in tis.items()}
    note = wait_until("the run's note", 30, lambda: client.get_run(dag_id, run_id).get("note"))
    assert note.startswith("**Refused**: decommission on kafka_sandbox: validate: "), note
    assert "replication factor" in note.splitlines()[0] and "trigger a new run" in note, note
    log = client.task_log(dag_id, run_id, "validate", tis[("validate", -1)]["try_number"], -1)
    assert "nothing was touched" in json.dumps(log)
    assert_one_plain_failure_line(log, "replication factor")
    assert sorted(sandbox.registered_brokers()) == [0, 1, 2]


def param_field(page: Any, dialog: Any, name: str) -> Any:
    """The trigger form's field group of param ``name``."""
    return dialog.get_by_role("group").filter(has=page.locator("label", has_text=re.compile(rf"^{re.escape(name)}")))


def test_config_change_form_takes_changes_and_broker_ids_and_the_note_says_what_it_would_change(
    page: Any, airflow_ui: RunningAirflow, sandbox: Any, tmp_path: Path
) -> None:
    """kafka_config_change from its Trigger form as an operator fills it: ``changes`` typed into its JSON editor,
    ``scope`` typed as broker ids ``[1]`` into its text field (a string or a list of ids: Airflow parses the JSON),
    dry run on. The run's conf holds exactly what was typed (numbers as numbers), it succeeds touching nothing,
    and its note says what a real run would change (``kafka_ops.done_lines``); a scope typed as lines of ids
    instead is refused by the form (Airflow's own check of the param's schema), nothing triggered."""
    dag_id = "kafka_config_change"
    client = airflow_ui.client
    wait_until(f"the DAG {dag_id} to be parsed", 120, lambda: client.get_dag(dag_id), poll_s=2.0)
    client.set_paused(dag_id, False)
    files = {b: sandbox.host_dir(b).server_properties.read_text() for b in sandbox.registered_brokers()}
    starts_before = sandbox.starts(sandbox.registered_brokers())

    def fill(scope_text: str) -> Any:
        dialog = open_trigger_form(page, dag_id)
        dialog.get_by_role("checkbox", name="dry_run").locator("xpath=..").click()
        changes = param_field(page, dialog, "changes")
        changes.get_by_role("textbox", name="Editor content").wait_for(state="attached")
        changes.get_by_role("code").click()
        page.keyboard.press("ControlOrMeta+a")
        page.keyboard.press("Backspace")
        page.keyboard.insert_text('{"log.cleaner.backoff.ms": 20000}')
        wait_until("the changes editor to hold the change", 30, lambda: '"log.cleaner.backoff.ms":20000}' in
                   re.sub(r"\s", "", changes.get_by_role("code").inner_text()), poll_s=0.3)
        param_field(page, dialog, "scope").get_by_role("textbox").fill(scope_text)
        return dialog

    def run_ids() -> list[str]:
        return [r["dag_run_id"] for r in client.request("GET", f"/dags/{dag_id}/dagRuns")["dag_runs"]]

    before = run_ids()
    dialog = fill("1\n2")
    dialog.get_by_role("button", name="Trigger", exact=True).click()
    expect(dialog.get_by_text(re.compile(r"Invalid input for param scope"))).to_be_visible()
    shot(page, tmp_path, "config-change-form-scope-refused")
    assert run_ids() == before, "the refused form triggered nothing"

    dialog = fill("[1]")
    shot(page, tmp_path, "config-change-form")
    run_id = submit(page, dialog, dag_id)
    conf = client.get_run(dag_id, run_id)["conf"]
    assert (conf["changes"], conf["scope"], conf["dry_run"]) == ({"log.cleaner.backoff.ms": 20000}, [1], True), conf
    run = wait_for_run(client, run_id, dag_id)
    assert run["state"] == "success", unsuccessful(client, run_id, dag_id)
    note = wait_until("the run's note", 30, lambda: client.get_run(dag_id, run_id).get("note"))
    assert note.startswith("**Succeeded**: config change on kafka_sandbox (DRY RUN: nothing was touched)"), note
    assert ("- config (dry run: nothing changed): would change live at broker 1: log.cleaner.backoff.ms=20000; "
            "would write server.properties on brokers [1]") in note, note
    assert {b: sandbox.host_dir(b).server_properties.read_text() for b in files} == files, "no file written"
    assert sandbox.starts(sandbox.registered_brokers()) == starts_before, "nothing restarted"


def test_a_run_marked_failed_ends_failed_and_the_cleared_run_ends_succeeded_with_a_fresh_note(
    page: Any, airflow_ui: RunningAirflow, sandbox: Any, tmp_path: Path
) -> None:
    """A real roll of two brokers (soak 45 s) marked failed in the browser ("Mark Dag Run as..." -> Failed ->
    Confirm) while the first one soaks: the run ends **failed** (not green: ``run_outcome`` fails it), the lock is
    released, that broker is recorded back (not "starting"), and the note says the run was stopped and to clear the
    whole run. "Clear Dag Run" (existing tasks) in the browser resumes it: it ends **success**, its note rewritten
    (nothing of the stopped attempt left), and each of the two brokers was restarted exactly once over both attempts,
    the third not at all."""
    from hooks.cluster_lock import LOCK_PATH

    client = airflow_ui.client
    brokers = sorted(sandbox.registered_brokers())
    rolled = brokers[:2]  # the mark lands in the first one's soak; the resumed run restarts the second
    starts_before = sandbox.starts(brokers)
    # a soak long enough for the page to open and the mark to land on a loaded machine
    run_id = client.trigger(DAG_ID, {"cluster": "kafka_sandbox", "brokers": rolled, "soak_s": 45,
                                     "healthcheck_interval_s": 2, "lag_ok_consecutive": 1})["dag_run_id"]

    def soaking() -> bool:
        if client.get_run(DAG_ID, run_id)["state"] in ("success", "failed"):
            raise UiTestError(f"run {run_id} ended before its first broker soaked: {unsuccessful(client, run_id)}")
        ti = states(client, run_id).get(("restart.broker", 0)) or {}
        return ti.get("state") == "running" and "soak" in str(ti.get("rendered_map_index") or "")

    wait_until("restart.broker[0] to soak", RUN_TIMEOUT_S, soaking, poll_s=1.0)
    page.goto(f"/dags/{DAG_ID}/runs/{quote(run_id, safe='')}")
    page.get_by_test_id("mark-run-as-button").click()
    page.get_by_test_id("mark-run-as-failed").click()
    shot(page, tmp_path, "mark-run-failed-dialog")
    page.get_by_test_id("mark-run-as-confirm").click()
    run = wait_for_run(client, run_id)
    tis = states(client, run_id)
    assert run["state"] == "failed", {k: ti["state"] for k, ti in tis.items()}
    assert tis[("restart.broker", 0)]["state"] == "failed", "the running task was failed by the mark"
    assert tis[("run_outcome", -1)]["state"] == "failed", "the teardown ran and failed the run"
    with sandbox.zk() as zk:
        assert zk.exists(LOCK_PATH) is None, "the lock was released by the teardown"
    note = wait_until("the stopped run's note", 30, lambda: client.get_run(DAG_ID, run_id).get("note"))
    # Airflow fails every instance of the running mapped task (finished ones too): the note names the task
    assert note.startswith("**Stopped**: rolling restart on kafka_sandbox: restart.broker was failed from outside"), \
        note
    assert "was failed from outside" in note and "clear the whole run" in note, note
    assert "cluster lock released" in note, f"the teardown released the lock the killed task held: {note}"
    done = re.search(r"roll 'restart': restarted \[([\d, ]+)\] of", note)
    assert done and len(done[1].split(",")) == 1, f"the soaking broker was back in every ISR, recorded done: {note}"
    # which map index is which broker, for `airflow tasks clear -m` (kept from the running note by the teardown)
    mapping = re.search(r"^- roll 'restart': map index (.*)$", note, re.M)
    assert mapping, note
    assert sorted(int(b) for b in re.findall(r"\d+ = broker (\d+)", mapping[1])) == sorted(rolled), note
    page.reload()
    expect(page.get_by_text("was failed from outside").first).to_be_visible(timeout=20_000)
    shot(page, tmp_path, "run-marked-failed")

    # the run header's clear button (its name is its tooltip: "Press shift+c to clear" while shortcuts are on); the
    # header comes before the task instances' own clear buttons
    page.get_by_role("button", name=re.compile(r"^(Clear Dag Run|Press shift\+c to clear)$")).first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Clear existing tasks").click()
    shot(page, tmp_path, "clear-run-dialog")
    dialog.get_by_role("button", name="Confirm").click()
    wait_until("the cleared run to start again", 60, lambda: client.get_run(DAG_ID, run_id)["state"] != "failed",
               poll_s=1.0)
    run = wait_for_run(client, run_id)
    assert run["state"] == "success", unsuccessful(client, run_id)
    note = wait_until("the note of the resumed run", 30,
                      lambda: (lambda n: n if n.startswith("**Succeeded**") else None)(
                          client.get_run(DAG_ID, run_id).get("note") or ""))
    assert note.startswith("**Succeeded**: rolling restart on kafka_sandbox\n\n- "), note
    assert "Stopped" not in note and "failed from outside" not in note and "next:" not in note, note
    starts = sandbox.starts(brokers)
    assert {b: starts[b] - starts_before[b] for b in brokers} == {b: int(b in rolled) for b in brokers}, \
        "each rolled broker restarted exactly once over the stopped and the resumed attempt, the other never"
    page.reload()
    expect(page.get_by_text("rolling restart on kafka_sandbox").first).to_be_visible(timeout=20_000)
    shot(page, tmp_path, "run-cleared-succeeded")


def test_upgrade_waits_for_approval_in_required_actions_and_goes_on_when_approved(
    page: Any, airflow_ui: RunningAirflow, sandbox: Any, tmp_path: Path
) -> None:
    """kafka_upgrade 3.6.2 -> 3.7.1 without advance approval: after the binaries roll the run waits in
    ``approve_protocol_bump`` (Airflow's human-in-the-loop state); the Required Actions page lists it, the
    task's page shows the question with Approve / Reject, and Approve (clicked in the browser) lets the IBP
    roll go on. Read back: the answer by ``admin`` (REST), every broker's own log shows it started on
    3.7.1 with IBP 3.6, then once more with IBP 3.7.

    Runs last in this module: it leaves the session's sandbox upgraded (still healthy)."""
    from demo import sandbox_env

    dag_id = "kafka_upgrade"
    client = airflow_ui.client
    brokers = sorted(sandbox.registered_brokers())
    starts_before = sandbox.starts(brokers)
    sandbox_env.unpack_release(REPO, Path(sandbox.workdir), "3.7.1")  # what configuration management does first
    wait_until(f"the DAG {dag_id} to be parsed", 120, lambda: client.get_dag(dag_id), poll_s=2.0)
    client.set_paused(dag_id, False)
    run_id = client.trigger(dag_id, {"cluster": "kafka_sandbox", "target_version": "3.7.1",
                                     "healthcheck_interval_s": 2, "lag_ok_consecutive": 1})["dag_run_id"]

    def awaiting() -> bool:
        ti = states(client, run_id, dag_id).get(("approve_protocol_bump", -1)) or {}
        if client.get_run(dag_id, run_id)["state"] == "failed":
            raise UiTestError(f"run {run_id} failed before the approval: {states(client, run_id, dag_id)}")
        return ti.get("state") == "awaiting_input"

    def approved_or_asked_again() -> str | None:
        ti = states(client, run_id, dag_id).get(("approve_protocol_bump", -1)) or {}
        if ti.get("state") == "awaiting_input" and int(ti.get("try_number") or 0) > answered[-1]:
            return "asked again"
        if ti.get("state") in ("success", "failed", "skipped", "upstream_failed") or \
                client.get_run(dag_id, run_id)["state"] in ("success", "failed"):
            return "done"
        return None

    try:
        answered = [approve_in_the_browser(page, client, dag_id, run_id, awaiting, tmp_path)]
        # Airflow 3.3 fails an answered try when the answer lands before its scheduler has seen the task pause
        # ("state mismatch"); the retry acts on that answer (read back over REST), unless Airflow kept no history of
        # it (GET .../hitlDetails/tries/1 answering 404, seen once on a loaded machine): then it asks again, and the
        # browser answers again, as an operator would in Required Actions
        while wait_until("the approval to be acted on or asked again", RUN_TIMEOUT_S, approved_or_asked_again,
                         poll_s=2.0) == "asked again" and len(answered) < 3:
            answered.append(approve_in_the_browser(page, client, dag_id, run_id, awaiting, tmp_path))
    except BaseException:
        # the run would wait for an answer holding the cluster lock, and every later run on the session's
        # sandbox would wait behind it: answer Reject (the run then ends and its teardown releases the lock)
        try:
            client.request("PATCH", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                                    "approve_protocol_bump/-1/hitlDetails", json={"chosen_options": ["Reject"]})
        except Exception as exc:  # noqa: BLE001 - the test's own failure is the one to report
            print(f"could not reject run {run_id}: {exc}")
        raise

    run = wait_for_run(client, run_id, dag_id)
    tis = states(client, run_id, dag_id)
    assert run["state"] == "success", unsuccessful(client, run_id, dag_id)
    approval = tis[("approve_protocol_bump", -1)]
    assert approval["state"] == "success"
    # the answer, of the try that received it: an answer that came before the scheduler saw the task pause makes
    # Airflow 3.3 fail that try ("state mismatch"); its retry acts on that answer without asking again
    answers = [client.request("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                                     f"approve_protocol_bump/-1/hitlDetails/tries/{n}", ok_404=True)
               for n in range(1, int(approval["try_number"]) + 1)]
    given = [a for a in answers if a and a.get("response_received")]
    # one answer may stand on two tries (seen once: 2 tries answered, 1 click): on the try it reached and on the retry
    # that acted on it, so answers are counted by when they were given
    said = [(n, a.get("responded_at"), (a.get("responded_by_user") or {}).get("name"), a.get("chosen_options"))
            for n, a in enumerate(answers, 1) if a and a.get("response_received")]
    assert 1 <= len({a.get("responded_at") for a in given}) <= len(answered), (answered, said)
    assert all(a["chosen_options"] == ["Approve"] and a["responded_by_user"]["name"] == "admin" for a in given), given
    for b in brokers:
        versions = sandbox.started_releases(b)
        assert versions[starts_before[b]:] == ["Kafka 3.7.1, IBP 3.6", "Kafka 3.7.1, IBP 3.7"], (b, versions)
    sandbox.wait_healthy(timeout_s=120)


def approve_in_the_browser(page: Any, client: Any, dag_id: str, run_id: str, awaiting: Any, tmp_path: Path) -> int:
    """Wait until the run awaits the approval, then approve it through Required Actions in the browser; returns the
    try number of the task instance that asked."""
    wait_until("approve_protocol_bump to await input", RUN_TIMEOUT_S, awaiting, poll_s=2.0)
    tis = states(client, run_id, dag_id)
    assert tis[("ibp.plan", -1)]["state"] is None, "the IBP phase must not start before the approval"
    asking = int(tis[("approve_protocol_bump", -1)]["try_number"])

    page.goto("/required_actions")
    row = page.get_by_role("row").filter(has_text=run_id).filter(has_text="Approval Required").first
    expect(row.get_by_text("Approval Required")).to_be_visible(timeout=30_000)
    shot(page, tmp_path, "required-actions")
    row.get_by_role("link", name=re.compile(r"^Bump the protocol versions of cluster kafka_sandbox to 3\.7\.1")).click()
    expect(page.get_by_text("cannot be downgraded to the old release")).to_be_visible()
    shot(page, tmp_path, "approval-question")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text(re.compile(r"Response received at .* from admin"))).to_be_visible()
    shot(page, tmp_path, "approved")
    return asking
