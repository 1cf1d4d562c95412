"""What a script run and a post-mortem run inside each rank."""
