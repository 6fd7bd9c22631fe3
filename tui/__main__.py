"""`python -m tui` runs the sentitop CLI."""

import sys

from tui.cli import main

sys.exit(main())
