"""`python -m mule.pirc.server`: the same as `mule serve`."""

import sys

from mule.pirc.server import main

sys.exit(main())
