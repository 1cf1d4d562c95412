"""Keeping a World past its kernel: the keeper process that stops a World no kernel holds
(``keeper``), the kernel's side of it, who owns the World and whether it is kept
(``ownership``), and the Worlds found on this machine for ``--attach``, ``worlds`` and ``stop``
(``found``)."""
