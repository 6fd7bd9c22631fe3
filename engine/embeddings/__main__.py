"""``python -m engine.embeddings``: prepare the corpus, then train on N local ranks."""

import sys

from engine.embeddings.cli import main

sys.exit(main())
