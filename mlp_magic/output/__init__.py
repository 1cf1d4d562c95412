"""What the ranks wrote: grouped, folded and rendered (pure/), shown in the notebook, kept on disk."""
