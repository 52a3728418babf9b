"""vllm-scaler bench: autoscaling policies compared on real traces in virtual time."""
