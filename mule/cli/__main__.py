"""`python -m mule.cli`: the `mule` command."""

import sys

from mule.cli import main

sys.exit(main())
