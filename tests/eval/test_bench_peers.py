"""The side-by-side benchmark's sums and its model-token yardstick (eval/bench_peers.py): the
"changes" total must leave the cold sync out, and a token count must be what MiniLM reads."""

from __future__ import annotations

from eval.bench_peers import TOTALLED, TokenCounter, totals


def row(system: str, step: str, cpu: float, texts: int, tokens: int | None) -> dict:
    values = dict.fromkeys(TOTALLED, 1)
    values.update(cpu_s=cpu, texts_embedded=texts, tokens_embedded=tokens)
    return {"system": system, "step": step, **values}


def test_changes_total_sums_every_step_after_the_cold_sync_per_system():
    rows = [
        row("a", "cold sync", 10.0, 100, 1000),
        row("b", "cold sync", 20.0, 200, None),
        row("a", "edit", 2.5, 3, 30),
        row("b", "edit", 4.0, 5, 50),
        row("a", "remove", 1.25, 0, 0),
        row("b", "remove", 1.0, 0, 0),
    ]
    result = totals(rows)
    assert (result["a"]["cold"]["cpu_s"], result["a"]["cold"]["texts_embedded"]) == (10.0, 100)
    assert result["a"]["changes"]["cpu_s"] == 3.75
    assert result["a"]["changes"]["texts_embedded"] == 3
    assert result["a"]["changes"]["tokens_embedded"] == 30
    assert result["a"]["changes"]["steps"] == 2
    assert result["a"]["all"]["cpu_s"] == 13.75
    # an unknown part makes its sum unknown, not smaller
    assert result["b"]["cold"]["tokens_embedded"] is None
    assert result["b"]["changes"]["tokens_embedded"] == 50
    assert result["b"]["all"]["tokens_embedded"] is None


def test_model_tokens_include_special_tokens_and_stop_at_the_model_limit():
    count = TokenCounter()
    assert count.limit == 256
    assert count(["hello"]) == 3  # [CLS] hello [SEP]
    assert count(["word " * 1000]) == 256  # the model reads no more
    assert count(["hello", "hello"]) == 6
    assert count([]) == 0
