import sys

from gspdml.cli import main

sys.exit(main())
