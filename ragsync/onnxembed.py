"""The ONNX Runtime backend for a local sentence-transformers model (``[embedder] backend``).

``backend = "onnx"`` runs the model's transformer exported to ONNX from the local weights (with
torch's TorchScript exporter, once, on this machine: no model hub); ``"onnx-int8"`` runs that
export with its MatMul weights quantised to int8 (dynamic, per output channel). Mean pooling and
normalisation are done here in numpy, as sentence-transformers does them.

Exports are kept in a cache folder (:func:`cache_root`) under a name holding the weights' hash,
the variant and the export recipe (:func:`export_name`). Each is written atomically (a temporary
file, then a rename) beside a manifest holding its size and SHA-256; a file whose manifest is
missing or does not match it (a partial copy, a damaged disk) is exported again. Once its export
is cached, a run imports onnxruntime, tokenizers and numpy, never torch or sentence-transformers.

Example::

    embedder = OnnxEmbedder(quantize=True)
    embedder.model_id
    # 'all-MiniLM-L6-v2@0.1.0+sha256:53aa51172d14;dim=384;max_seq=256;norm;onnx-int8'
    embedder.embed(["hello"])[0][:3]  # exports once (some seconds), then runs
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cached_property
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ragsync.digests import cache_base, file_sha256, remembered_sha256
from ragsync.embed import DEFAULT_MODEL, LocalModel
from ragsync.errors import ConfigError, EmbedError
from ragsync.resources import resource_error

log = logging.getLogger("ragsync")
# Shown without -v (like a sync's progress lines): the first run pauses for the export.
progress = logging.getLogger("ragsync.progress")

# Bump when the export or quantisation recipe changes: files of an older recipe are not used.
EXPORT_RECIPE = 1
OPSET = 17
OUTPUT = "last_hidden_state"
# Padded tokens per model call (a text longer than this goes alone). Small calls run faster per
# token on the CPU: their activations stay in cache. On the 1,269 texts of eval/bench_core.py's
# site (int8), one 2-thread session took 4.3–4.8 s with calls of 64 texts (about 9,600 tokens)
# and 3.2–3.6 s with calls of up to 1,024 tokens; two single-threaded runners took 2.7–3.1 s
# with calls of up to 256–768 (README "Embedding backends").
CALL_TOKENS = 512


def cache_root() -> Path:
    """Where exports are kept: ``$XDG_CACHE_HOME/ragsync/onnx``, else ``~/.cache/ragsync/onnx``."""
    return cache_base() / "onnx"


def export_name(label: str, digest: str, *, quantize: bool) -> str:
    """The cache file name of one export: model, weights hash, variant and recipe.

    Example::

        export_name("all-MiniLM-L6-v2", "53aa51172d14", quantize=True)
        # 'all-MiniLM-L6-v2-53aa51172d14-int8-r1.onnx'
    """
    return f"{label}-{digest}-{'int8' if quantize else 'fp32'}-r{EXPORT_RECIPE}.onnx"


def manifest_path(path: Path) -> Path:
    """The manifest beside an export: ``<file>.json``."""
    return path.with_name(f"{path.name}.json")


def verified(path: Path) -> bool:
    """Whether ``path`` is a whole export: its manifest names its exact size and SHA-256
    (hashed once per file: :func:`ragsync.digests.remembered_sha256`)."""
    try:
        manifest = json.loads(manifest_path(path).read_text())
        if path.stat().st_size != manifest["bytes"]:
            return False
        return bool(remembered_sha256(path) == manifest["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write_atomically(dest: Path, produce: Callable[[Path], object]) -> None:
    """Let ``produce`` write a temporary file beside ``dest``, then rename it to ``dest``.

    A crash or an error leaves no partial ``dest`` (at worst a stray ``.tmp`` file).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        produce(temporary)
        with temporary.open("rb") as file:
            os.fsync(file.fileno())
        os.replace(temporary, dest)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def mean_pool(hidden: Any, mask: Any, *, normalize: bool) -> Any:
    """Sentence vectors from token vectors: the mean over unmasked tokens, then unit length.

    Args:
        hidden: ``(batch, tokens, dim)`` token vectors.
        mask: ``(batch, tokens)`` attention mask (1 for a token, 0 for padding).
        normalize: scale each vector to unit length (the model has a Normalize module).
    """
    import numpy as np

    weights = mask[..., None].astype(np.float32)
    vectors = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    if normalize:
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    return vectors


def export_transformer(model_path: Path, dest: Path) -> None:
    """Export the transformer of the model folder ``model_path`` to the ONNX file ``dest``.

    Inputs ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when the model takes
    them), each ``(batch, tokens)``; output ``last_hidden_state``.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a model hub
    import inspect
    import warnings

    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    model = AutoModel.from_pretrained(str(model_path), local_files_only=True).eval()
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(model.forward).parameters:
        names.append("token_type_ids")

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    # Two rows of different lengths, one padded: the trace sees a real padding mask.
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]])
    example = (ids, (ids != 0).long(), torch.zeros_like(ids))[: len(names)]
    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, OUTPUT]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and deprecation notes, not faults
        # The TorchScript exporter: the dynamo one needs onnxscript and gains nothing here.
        torch.onnx.export(
            Encoder(),
            example,
            str(dest),
            dynamo=False,
            input_names=names,
            output_names=[OUTPUT],
            dynamic_axes=axes,
            opset_version=OPSET,
        )


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """Hide the quantizer's notes, logged on the root logger: one INFO line per tensor, and
    advice to pre-process (its shape inference fails on this graph)."""

    def keep(record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING or (
            record.levelno == logging.WARNING and "pre-processing" not in record.getMessage()
        )

    root = logging.getLogger()
    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


def quantize_int8(source: Path, dest: Path) -> None:
    """Quantise the ONNX file ``source`` to ``dest``: int8 MatMul weights per output channel.

    Measured on MiniLM against the fp32 export: cosine 0.987 on average with this recipe, 0.905
    when whole tensors (not channels) or the embedding lookup are quantised as well.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_quantizer():
        quantize_dynamic(
            str(source),
            str(dest),
            op_types_to_quantize=["MatMul"],
            weight_type=QuantType.QInt8,
            per_channel=True,
        )


def ensure_export(model: LocalModel, folder: Path, *, quantize: bool) -> Path:
    """The verified export of ``model`` in ``folder``, made first when missing or damaged.

    Raises:
        EmbedError: the export failed or ``folder`` cannot be written (named in the message).
    """
    label = Path(model.model_name).name
    path = folder / export_name(label, model.weights_digest, quantize=quantize)
    if verified(path):
        return path
    source = ensure_export(model, folder, quantize=False) if quantize else None
    variant = "int8" if quantize else "fp32"
    progress.info("exporting %s to ONNX (%s) as %s: once, some seconds", label, variant, path)
    started = time.monotonic()
    try:
        if source is not None:
            write_atomically(path, lambda temporary: quantize_int8(source, temporary))
        else:
            write_atomically(path, lambda temporary: export_transformer(model.path, temporary))
        manifest = {
            "model": label,
            "revision": model.revision,
            "weights_sha256": model.weights_digest,
            "variant": variant,
            "recipe": EXPORT_RECIPE,
            "bytes": path.stat().st_size,
            "sha256": file_sha256(path),
            "exported_with": {name: version(name) for name in ("torch", "onnxruntime")},
            "seconds": round(time.monotonic() - started, 1),
        }
        text = json.dumps(manifest, indent=2) + "\n"
        write_atomically(manifest_path(path), lambda temporary: temporary.write_text(text))
    except ImportError as exc:  # onnx quantises: a dependency of ragsync, so a broken install
        raise EmbedError(
            str(path), f"ONNX export needs {exc.name}, a ragsync dependency: reinstall ragsync"
        ) from exc
    except (OSError, RuntimeError, ValueError) as exc:
        full = resource_error(exc, where=f"{path.parent} (the ONNX cache)", path=path.parent)
        if full is not None:  # README "Resource limits"
            raise full from exc
        raise EmbedError(str(path), f"ONNX export failed ({type(exc).__name__}: {exc})") from exc
    return path


class OnnxEmbedder(LocalModel):
    """The model on ONNX Runtime, on the CPU; same vectors as torch (cosine ≥ 0.999 in fp32).

    Args:
        model: the bundled model's name or a local sentence-transformers folder.
        quantize: run the int8 export (faster, cosine about 0.99 to fp32).
        batch_size: texts per model call on the other backends; here the model is called
            with at most :data:`CALL_TOKENS` padded tokens at a time (the pipeline still hands
            ``embed`` ``batch_size`` × 16 texts at a time: ragsync.pipeline.vectors).
        threads: runners calling the model at once, each on one CPU thread.
        cache_dir: where exports are kept (default :func:`cache_root`).

    Raises:
        ConfigError: onnxruntime is not installed, or the model pools otherwise than by mean.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        quantize: bool = False,
        batch_size: int = 64,
        threads: int = 2,
        cache_dir: str | Path | None = None,
    ):
        super().__init__(model, batch_size=batch_size, threads=threads)
        self.quantize = quantize
        self.backend = "onnx-int8" if quantize else "onnx"
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        if find_spec("onnxruntime") is None:
            raise ConfigError(
                f"backend {self.backend!r} needs onnxruntime, a ragsync dependency: reinstall "
                'ragsync, or set backend = "torch"',
                key="embedder.backend",
            )
        modules = json.loads((self.path / "modules.json").read_text())
        for module in modules:
            if module["type"].endswith("Pooling"):
                pooling = json.loads((self.path / module["path"] / "config.json").read_text())
                modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
                if modes != {"pooling_mode_mean_tokens"}:
                    raise ConfigError(
                        f"backend {self.backend!r} does mean pooling only; {model!r} has "
                        f'{", ".join(sorted(modes)) or "none"} (use backend = "torch")',
                        key="embedder.backend",
                    )

    def ensure_export(self) -> Path:
        """The verified export this embedder runs (exported first when needed)."""
        return ensure_export(self, self.cache_dir, quantize=self.quantize)

    @cached_property
    def _session(self) -> Any:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # ``threads`` runners call one session at once, each on one thread: no intra-op
        # hand-offs, and both cores stay busy while a runner pools or packs its next call.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        return onnxruntime.InferenceSession(
            str(self.ensure_export()), options, providers=["CPUExecutionProvider"]
        )

    @cached_property
    def _window_tokenizer(self) -> Any:
        """The tokenizer with the model window's truncation, as sentence-transformers applies."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=self.max_input_tokens)
        tokenizer.no_padding()
        return tokenizer

    def warm(self) -> None:
        """Load the session and the tokenizer now (the first ``embed`` would)."""
        self._session, self._window_tokenizer  # noqa: B018

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        session = self._session
        inputs = {item.name for item in session.get_inputs()}
        encodings = self._window_tokenizer.encode_batch(list(texts))
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)

        def run(call: list[int]) -> None:
            width = max(len(encodings[i].ids) for i in call)
            ids = np.zeros((len(call), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(call):
                tokens = encodings[i].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run([OUTPUT], {k: v for k, v in feed.items() if k in inputs})[0]
            vectors[call] = mean_pool(hidden, mask, normalize=self.normalized)

        calls = model_calls([len(e.ids) for e in encodings], CALL_TOKENS)
        if self.threads > 1 and len(calls) > 1:
            with ThreadPoolExecutor(min(self.threads, len(calls))) as runners:
                list(runners.map(run, calls))  # list(): a runner's exception is raised here
        else:
            for call in calls:
                run(call)
        return vectors.tolist()  # type: ignore[no-any-return]


def model_calls(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Group text indexes into model calls of at most ``budget`` padded tokens each.

    Texts go in order of length (similar lengths pad little, as sentence-transformers sorts
    them), so a call's padded size is its count times its last text's length; a text longer
    than ``budget`` makes a call alone.
    """
    calls: list[list[int]] = []
    call: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if call and (len(call) + 1) * lengths[i] > budget:
            calls.append(call)
            call = []
        call.append(i)
    if call:
        calls.append(call)
    return calls
