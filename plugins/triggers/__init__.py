"""Triggers of the operators that wait deferred (the triggerer runs them; no worker slot held)."""
