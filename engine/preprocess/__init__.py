"""Preprocessing: raw review files → de-duplicated, encoded, chunked dataset.h5 (issue 2).

Public API (stable names):

- :func:`run_preprocess` ``(cfg, emitter=None, *, rating_max=None, negative_max=None,
  mrjob_args=None) -> stats``: emits ``stage_start``, ``progress`` (stage=preprocess, done/total
  input bytes, rate, records), ``summary`` and ``stage_end`` through the Emitter.
- :func:`engine.preprocess.encode.load_encoder` ``(data_dir) -> Encoder`` with
  ``Encoder.encode_texts(texts) -> (tokens N×L, lengths)``: the dataset's cleaning, stopwords
  and vocabulary applied to new raw text (settings read from vocab.json).
- :func:`engine.preprocess.readers.iter_records` ``(path, cfg, spec=None)``: ``Record(text,
  rating, label)`` of each usable line of a raw file (for ``sentitop eval``).
- ``python -m engine.preprocess`` = ``sentitop preprocess`` (:mod:`engine.preprocess.cli`).

Semantics: text = reviewText (+ summary on request); cleaning decodes HTML entities, folds
accents, deletes apostrophes ("don't" → "dont"), turns every other non-alphanumeric byte into a
space and lowercases (:mod:`.text`); de-duplication by cleaned text over all inputs keeps the
most frequent rating, ties → the smaller; label = rating > negative_max (1-3★ negative, 4-5★
positive; IMDB 1-10: 1-4 negative, 7-10 positive); stopwords (NLTK English + product/would/get,
negations optionally kept; none with the ``default`` preset) are removed after de-duplication;
a distinct text left without words is skipped as ``only_stopwords``; test split = BLAKE2b of the
cleaned text < test_fraction; vocabulary = most frequent training words, ties alphabetical, ids
from 2 (0 pad, 1 unknown); rows ordered by a BLAKE2b key of the text, so every runner and worker
count gives the same file.

Output: ``dataset.h5`` (/train and /test: tokens N×seq_len uint16 or int32, labels uint8,
lengths int32; row-block chunks; attrs vocab_size, num_ids, seq_len, pad_id, unk_id,
format_version, vocab_sha256), ``vocab.json`` (itos + settings) and ``stats.json``, written
into a stage folder beside the output and swapped in as a whole (:mod:`.output_folder`): the
output holds the previous complete set or the new one, never a mix. An input folder stands for
its review files (:mod:`.inputs`, shared with ``sentitop embed``).

Heavy modules load on first call, so the CLI can import this package cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.config import PreprocessConfig
    from engine.events import Emitter


def run_preprocess(
    cfg: PreprocessConfig, emitter: Emitter | None = None, **options: Any
) -> dict[str, Any]:
    """Preprocess cfg.inputs into cfg.output and return the stats (see pipeline.run_preprocess
    for the keyword options: rating_max, negative_max, mrjob_args)."""
    from engine.preprocess.pipeline import run_preprocess as _run

    return _run(cfg, emitter, **options)


__all__ = ["run_preprocess"]
