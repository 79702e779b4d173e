"""Entry point of ``python -m demo``; see :mod:`demo.cli`."""

import sys

from demo.cli import main

sys.exit(main())
