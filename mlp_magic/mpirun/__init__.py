"""The ``%%mpirun`` cell: plan, run on the World, show."""
