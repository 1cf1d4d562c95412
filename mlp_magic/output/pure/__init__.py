"""Grouping, folding and rendering many ranks' outputs (pure: values in, text out)."""
