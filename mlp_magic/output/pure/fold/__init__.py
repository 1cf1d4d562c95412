"""Folding outputs that differ only in their numbers into one template (pure)."""
