"""GPU value types, nvidia-smi parsers, layout hints and the readings' history (pure)."""
