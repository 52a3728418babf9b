"""``python -m scaler.bench.scale``."""

import os

from scaler.bench.scale.cli import main

if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
