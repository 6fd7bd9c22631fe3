"""Fixtures: a small real corpus (the first IMDB reviews) and one torch thread per test run."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.embeddings.corpus import Corpus, build_corpus, read_text_docs

IMDB = Path(__file__).resolve().parents[3] / "shared" / "data" / "imdb_aclImdb_labeled.jsonl.gz"


@pytest.fixture(scope="session")
def imdb_path() -> Path:
    """The IMDB reviews file (tests skip when the shared data folder is absent)."""
    if not IMDB.is_file():
        pytest.skip(f"{IMDB} not found")
    return IMDB


@pytest.fixture(scope="session")
def imdb_corpus(imdb_path: Path) -> Corpus:
    """The first 300 IMDB reviews as a corpus (about 56k tokens, 1.6k words)."""
    return build_corpus(read_text_docs(str(imdb_path)), min_count=5, max_vocab=5000, max_docs=300)


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """Tests run beside other jobs on 2 cores; spinning OpenMP threads then crawl."""
    import torch

    torch.set_num_threads(1)
