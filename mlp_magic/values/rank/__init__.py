"""What ``--compare``, ``--pull`` and ``--push`` run inside each rank."""
