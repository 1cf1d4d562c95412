"""What ranks that could not start said last, read per rank from the launcher's shared log."""


def test_the_last_words_of_ranks_that_could_not_start_are_read_per_rank():
    from mlp_magic.world.start.registration import last_words

    openmpi = ("[1,0]<stderr>: 2026-11-25 09:51:13.117 [rank 0] [RankEngine] WARNING | Not using CurveZMQ\n"
               "[1,1]<stderr>: Traceback (most recent call last):\n"
               "[1,1]<stderr>:   File \"<frozen runpy>\", line 198, in _run_module_as_main\n"
               "[1,1]<stderr>: ModuleNotFoundError: No module named 'mpi4py'\n"
               "prterun detected that one or more processes exited with non-zero status,\n"
               "[1,3]<stdout>: /usr/bin/python3: No module named mlp_magic.engine.main\n")
    assert last_words(openmpi, []) == {
        1: "ModuleNotFoundError: No module named 'mpi4py'",
        3: "/usr/bin/python3: No module named mlp_magic.engine.main"}
    mpich = "[2] SyntaxError: invalid syntax\n[0] all good\n"
    assert last_words(mpich, []) == {2: "SyntaxError: invalid syntax"}
