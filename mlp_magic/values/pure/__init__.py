"""Grouping the ranks' value summaries and saying how they differ (pure)."""
