"""``python -m demo`` (``make demo``): the rolling restart on the sandbox, driven through Airflow's REST API.

Modules: :mod:`demo.cli` (argparse, the up/down sequence), :mod:`demo.sandbox_env` (the sandbox CLI and
its ``airflow.env``), :mod:`demo.airflow_proc` (``airflow standalone`` in the background: start, find,
stop), :mod:`demo.rest` (REST client), :mod:`demo.progress` (per-broker progress lines).
"""
