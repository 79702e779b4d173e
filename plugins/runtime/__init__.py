"""Run-time helpers shared by operators: params as typed, the roll's record, waiting with typed failures.

Import absolutely (``from runtime.waiting import wait_until``); no Airflow plugin lives here.
"""
