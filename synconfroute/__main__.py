"""`python -m synconfroute ...` is `synconfroute ...` (editors may start either)."""

import sys

from synconfroute.server.commands.cli import main

sys.exit(main())
