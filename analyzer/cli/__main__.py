"""`python -m analyzer.cli`: the `seamwatch` command."""

import sys

from analyzer.cli import main

sys.exit(main())
