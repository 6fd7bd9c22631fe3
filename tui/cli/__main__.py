"""`python -m tui.cli` runs the sentitop CLI."""

import sys

from tui.cli.main import main

sys.exit(main())
