"""The doctor's findings, checks and report (pure: facts in, findings out)."""
