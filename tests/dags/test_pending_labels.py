"""Grid labels before a mapped instance runs: the cluster policy in ``plugins/airflow_local_settings.py``
(``runtime.pending_labels``) labels each instance when Airflow's scheduling code creates it.

``dag.test()`` expands mapped tasks with the scheduler's own code (``TaskMap.expand_mapped_task``). Its
``mark_success_pattern`` sets the mapped instances to success as soon as they are ready, without running
them: their labels are then exactly what the scheduler gave them, i.e. what the Grid showed while they waited.
The product's rolls are checked the same way in the rolling restart's DAG tests.
"""

from __future__ import annotations

from airflow_env import published_labels, run_dag

DAG_ID = "kafka_pending_labels_test"
EXPECTED = ["broker 5 (1/3)", "broker 3 (2/3)", "broker 9 (3/3)"]


def test_mapped_instances_get_their_published_labels_when_created(airflow_db):
    import airflow.settings

    assert not airflow.settings.task_instance_mutation_hook.is_noop, "the policy is installed from plugins/"
    result = run_dag(DAG_ID, {}, mark_success_pattern="labelled|unlabelled")
    assert result.state == "success", result.states
    assert published_labels(DAG_ID, result.run_id) == {"labelled": EXPECTED}
    assert result.mapped_labels("labelled") == EXPECTED
    # a mapped task without published labels keeps Airflow's bare map indexes
    assert result.mapped_labels("unlabelled") == ["0", "1", "2"]

