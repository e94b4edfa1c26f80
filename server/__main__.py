"""`python -m server ...` is `synconfroute ...` (editors may start either)."""

import sys

from .cli import main

sys.exit(main())
