"""Starting the host's agent from inside a rank (a host chore)."""
