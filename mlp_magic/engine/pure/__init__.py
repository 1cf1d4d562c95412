"""What an engine needs of its Python (pure)."""
