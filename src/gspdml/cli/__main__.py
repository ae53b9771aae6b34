"""``python -m gspdml.cli``: the ``gspdml`` command where its script is not on the path."""

import sys

from gspdml.cli import main

sys.exit(main())
