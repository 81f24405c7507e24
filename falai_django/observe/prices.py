"""`FALAI["MODEL_PRICES"]`, read once for the checks and the Operations page.

Per million tokens, by model: `{"input": 0.30, "cached_input": 0.03, "output": 2.50}` or the
3-item `(input, cached input, output)`. The token types' own names are read too (`prompt`,
`cached`, `completion`, as `falai_llm_tokens_total{type}` says them). Cached input costs the input
price when left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRICE_KEYS = ("input", "cached_input", "output")
ALIASES = {
    "input": "input", "prompt": "input",
    "cached_input": "cached_input", "cached": "cached_input", "cache_read": "cached_input",
    "output": "output", "completion": "output",
}


def parse_price(price: Any) -> tuple[dict[str, float] | None, str | None]:
    """(the price as {"input", "cached_input", "output"}, None), or (None, what is wrong)."""
    if isinstance(price, Mapping):
        unknown = sorted(str(k) for k in price if k not in ALIASES)
        if unknown:
            return None, f"unknown keys {unknown}"
        values: dict[str, Any] = {}
        for key, value in price.items():
            name = ALIASES[key]
            if name in values:
                return None, f"{name} is given twice"
            values[name] = value
    elif isinstance(price, list | tuple) and len(price) == 3:
        values = dict(zip(PRICE_KEYS, price, strict=True))
    else:
        return None, "a price is a dict with input and output (cached_input optional) or (input, cached input, output)"
    missing = [key for key in ("input", "output") if values.get(key) is None]
    if missing:
        return None, f"missing {missing}"
    if values.get("cached_input") is None:
        values["cached_input"] = values["input"]
    for key in PRICE_KEYS:
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return None, f"{key} must be a non-negative number, not {value!r}"
    return {key: float(values[key]) for key in PRICE_KEYS}, None


def parse_prices(prices: Any) -> dict[str, dict[str, float]]:
    """The well-formed entries of the setting (the checks report the others)."""
    if not isinstance(prices, Mapping):
        return {}
    parsed = {}
    for model, price in prices.items():
        value, _ = parse_price(price)
        if value is not None and isinstance(model, str):
            parsed[model] = value
    return parsed
