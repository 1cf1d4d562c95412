"""The output concept's part that runs inside a rank."""
