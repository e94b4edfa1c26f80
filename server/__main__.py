"""`python -m synconfroute.server ...` is `synconfroute ...` (as `python -m synconfroute`)."""

import sys

from .commands.cli import main

sys.exit(main())
