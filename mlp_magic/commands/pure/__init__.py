"""The verbs, their options and the parsing of a line or an argv into one (pure)."""
