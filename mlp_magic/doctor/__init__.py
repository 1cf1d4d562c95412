"""``mlp-magic doctor`` / ``%mlp_doctor``: every host of a job checked at once, compared, the odd one
named: the per-host probe, collecting over ssh or a World's engines, the link test; its options are
a verb of commands/pure/table."""
