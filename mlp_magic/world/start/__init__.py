"""Starting a World's processes: MPI, the controller's address, launch, registration."""
