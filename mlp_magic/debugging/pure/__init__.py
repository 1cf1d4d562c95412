"""Which frames and ranks an inspection looks at, and how a traceback reads (pure)."""
