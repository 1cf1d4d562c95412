"""What ``%allrun`` runs inside a rank (through a live World)."""
