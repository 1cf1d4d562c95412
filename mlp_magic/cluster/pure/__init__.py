"""The cluster picture's model, its changes and top's screen (pure)."""
