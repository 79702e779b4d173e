"""Errors of the planner."""


class PlanInputError(ValueError):
    """Bad input: the snapshot or the request cannot be planned as given.

    The CLI prints the message on stderr and exits with status 2, writing nothing. Waiting does not
    fix it: the snapshot or the arguments must change.
    """
