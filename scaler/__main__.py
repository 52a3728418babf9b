"""``python -m scaler`` runs the ``vllm-scaler`` command line."""

from scaler.cli import main

main()
