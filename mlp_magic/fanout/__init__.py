"""Running one command on many hosts at once: one fan-out (``hosts``), its transports, its parts under way."""
