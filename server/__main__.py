"""`python -m synconfroute.server ...` is `synconfroute ...` (as `python -m synconfroute`)."""

import sys

from .cli import main

sys.exit(main())
