"""vllm-scaler."""
