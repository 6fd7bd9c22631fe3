"""Synthetic McAuley 2014 reviews with the real corpus's skew, duplicates, lengths and noise."""

from __future__ import annotations

from engine.synth.generate import generate
from engine.synth.size import parse_size

__all__ = ["generate", "parse_size"]
