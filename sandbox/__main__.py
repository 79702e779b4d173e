"""``python -m sandbox``: see :mod:`sandbox.cli`."""

import sys

from sandbox.cli import main

sys.exit(main())
