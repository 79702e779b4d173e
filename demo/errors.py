"""The demo's one error type: a problem the message explains (printed as ``demo: error: ...``, exit 1)."""


class DemoError(RuntimeError):
    """A problem the user can act on; the message says what and, where possible, what to do."""
