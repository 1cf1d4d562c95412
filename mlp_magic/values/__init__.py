"""``%mpirun --compare``, ``--pull`` and ``--push``: values on the ranks."""
