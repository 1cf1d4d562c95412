"""Stack frames, py-spy's output, the merged stack tree and its rendering (pure)."""
