"""Builders of the operation DAGs: ``rolling_restart_dag``, ``scale_out_dag``, ``decommission_dag``,
``upgrade_dag`` (dags/ builds the default ones; a per-cluster file builds more, e.g. with a maintenance
window schedule)."""
