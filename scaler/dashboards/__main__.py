"""``python -m scaler.dashboards`` runs ``vllm-scaler dashboards``."""

from scaler.dashboards.cli import main

main()
