"""Work per SLOBop: what an engine measured next to what its layout predicts, per op kind."""

from __future__ import annotations

from typing import Any


def with_predictions(
    measured: dict[str, dict[str, float]] | None,
    predicted: dict[str, Any],
    ops: dict[str, int] | None,
    source: str,
) -> dict[str, Any] | None:
    """{kind: {ops, lio, pio, lio_predicted, pio_max_predicted}, model, source}; "all" is
    the mix the run did, predicted as the same mix of its kinds' predictions."""
    if not measured:
        return None
    ops = ops or {}
    out: dict[str, Any] = {}
    for kind, figures in measured.items():
        if kind == "all":
            total = sum(ops.values())
            lio = sum(n * predicted[k]["lio"] for k, n in ops.items() if k in predicted)
            pio = sum(n * predicted[k]["pio_max"] for k, n in ops.items() if k in predicted)
            guess = {"lio": lio / total, "pio_max": pio / total} if total and predicted else None
        else:
            guess = predicted.get(kind)
        out[kind] = {
            **{k: round(v, 2) if isinstance(v, float) else v for k, v in figures.items()},
            "lio_predicted": None if guess is None else round(guess["lio"], 2),
            "pio_max_predicted": None if guess is None else round(guess["pio_max"], 2),
        }
    return {**out, "model": predicted.get("model"), "source": source}
