"""``python -m engine.embeddings``: prepare the corpus, then train on N local ranks."""

from engine.embeddings.cli import main
from engine.rank_main import exit_rank

exit_rank(main())
