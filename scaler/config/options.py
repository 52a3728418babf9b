"""Range checks of numeric command-line options: one clear error per option out of range."""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["Bounds", "option_errors"]

#: option ("--rate-scale") -> (low, whether low is allowed, high)
Bounds = Mapping[str, tuple[float, bool, float]]


def option_errors(bounds: Bounds, **values: float) -> list[str]:
    """One error per option whose value is out of its range (or NaN/inf), naming the option.

    Keyword names are the options' (``rate_scale`` is ``--rate-scale``); each must be in
    ``bounds``. Returns ``[]`` when every value is in range.
    """
    errors = []
    for key, value in values.items():
        option = "--" + key.replace("_", "-")
        low, inclusive, high = bounds[option]
        ok = math.isfinite(value) and (value >= low if inclusive else value > low) and value <= high
        if not ok:
            expected = f"a number {'>=' if inclusive else '>'} {low:g}"
            if math.isfinite(high):
                expected += f" and <= {high:g}"
            errors.append(f"{option}: value {value:g}: expected {expected}")
    return errors
