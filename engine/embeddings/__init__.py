"""Second workload: distributed word embeddings (SGNS; word-table and character-LSTM encoders).

Trained synchronously (DDP all-reduce) or asynchronously (a parameter server on rank 0) and
judged by the PIP loss against the SVD of the corpus's SPPMI matrix. Entry point:
``python -m engine.embeddings`` (see :mod:`engine.embeddings.cli`). This package's top stays
torch-free so the CLI can import its argument set cheaply.
"""
