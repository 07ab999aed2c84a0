"""`python -m mule.serve`: the same as `mule serve`."""

import sys

from mule.serve import main

sys.exit(main())
