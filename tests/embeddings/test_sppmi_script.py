"""benchmarks/sppmi_embeddings.py: SVD word vectors written as an embeddings run that
train.model.init_embeddings loads, neighbours found by shared contexts."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from engine.sentiment.pretrained import align, load_pretrained

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "sppmi_embeddings.py"


def test_words_sharing_contexts_end_up_close(tmp_path: Path) -> None:
    rng = random.Random(0)
    fruit, tools = ["apple", "pear", "plum"], ["hammer", "saw", "drill"]
    lines = []
    for _ in range(600):
        topic, context = rng.choice(
            [(fruit, ["eat", "sweet", "ripe"]), (tools, ["build", "wood", "nail"])]
        )
        words = [rng.choice(topic), *rng.choices(context, k=4)]
        rng.shuffle(words)
        lines.append(json.dumps({"text": " ".join(words)}))
    texts = tmp_path / "texts.jsonl"
    texts.write_text("\n".join(lines) + "\n")
    out = tmp_path / "emb"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), str(texts), "--dim", "4", "--min-count", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    pre = load_pretrained(out)
    assert pre.dim == 4 and len(pre.words) == 12
    assert abs(float(pre.vectors.std()) - 1.0) < 1e-3  # the scale of a fresh nn.Embedding
    unit = pre.vectors / np.linalg.norm(pre.vectors, axis=1, keepdims=True)
    index = {w: i for i, w in enumerate(pre.words)}
    cos = unit @ unit.T
    same = cos[index["apple"], index["pear"]]
    other = cos[index["apple"], index["saw"]]
    assert same > other + 0.5, (same, other)
    table = align(pre, ["", "<unk>", "pear", "unseen"], seed=0, dim=4).table
    assert np.allclose(table[2], pre.vectors[index["pear"]])
