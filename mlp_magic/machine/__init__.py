"""This machine, asked: its names, its processes, its files, its clock, its GPUs and cores.

What core/ and the pure/ folders take as values, this folder reads: the host names
(``names``), whether a process still runs (``process_alive``), a file the user names, bounded
(``user_files``), a blocking call under a deadline and the waits that read the clock
(``deadline``), and the hosts and slots of the environment with this machine's GPUs or cores
(``topology``). The standard library, the leaves and pure folders only: rank code imports it.
"""
