"""`python -m engine.preprocess`: the preprocess command line (same as `sentitop preprocess`)."""

import sys

from engine.preprocess.cli import main

sys.exit(main())
