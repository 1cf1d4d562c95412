"""allrun's one rule for running a command on a host (core/host_command), pure parts."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core import host_command
from mlp_magic.core.host_command import host_variables, script_arguments, without_rank_variables
from mlp_magic.world.start.mpi import FORWARD_NAMES


def test_the_forwarded_variables_are_those_mpiexec_forwards_to_ranks():
    assert host_command.FORWARDED == FORWARD_NAMES


def test_host_variables_forward_what_the_caller_sets_and_name_the_host():
    env = {"PATH": "/x:/y", "PYTHONPATH": "/p", "HOME": "/root", "SECRET": "s"}
    assert host_variables(env, "worker1", 1, 3) == {
        "PATH": "/x:/y", "PYTHONPATH": "/p",
        "ALLRUN_HOST": "worker1", "ALLRUN_HOST_INDEX": "1", "ALLRUN_HOST_COUNT": "3"}


def test_a_ranks_variables_go_a_sites_settings_stay():
    rank = {"RANK": "0", "LOCAL_RANK": "0", "MASTER_PORT": "29500", "OMPI_COMM_WORLD_RANK": "0",
            "PMIX_SERVER_URI41": "x", "PMIX_RANK": "0", "PRTE_LAUNCHED": "1", "IPP_CONNECTION_INFO": "{}",
            "OMPI_MCA_ess_base_jobid": "1", "OMPI_FILE_LOCATION": "/tmp/x", "TF_CONFIG": "{}"}
    site = {"PATH": "/bin", "OMPI_MCA_btl": "self,tcp", "NCCL_DEBUG": "INFO", "HOME": "/root"}
    assert without_rank_variables({**rank, **site}) == site


@given(st.text(), st.text(), st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]*", fullmatch=True), st.text()))
def test_script_arguments_keep_every_word_whole(folder, command, variables):
    words = script_arguments(folder, command, variables)
    assert words[:2] == [folder, command]
    assert [w.partition("=") for w in words[2:]] == [(n, "=", v) for n, v in variables.items()]


def test_a_helper_of_a_rank_is_no_rank_and_runs_the_ranks_copy_of_mlp_magic():
    env = {"RANK": "3", "OMPI_COMM_WORLD_RANK": "3", "MASTER_ADDR": "w0", "NCCL_DEBUG": "INFO",
           "PYTHONPATH": "/a"}
    helper = host_command.helper_environment(env, "/src/checkout")
    assert helper == {"NCCL_DEBUG": "INFO", "PYTHONPATH": "/src/checkout:/a"}
    assert host_command.helper_environment({}, "/src/checkout") == {"PYTHONPATH": "/src/checkout"}


@pytest.mark.parametrize("installed", ["/venv/lib/python3.11/site-packages",
                                       "/usr/lib/python3/dist-packages/"])
def test_an_installed_copy_is_left_off_pythonpath(installed):
    """Before the standard library, site-packages would let an old backport shadow it."""
    assert host_command.helper_environment({"PYTHONPATH": "/a"}, installed) == {"PYTHONPATH": "/a"}
    assert host_command.helper_environment({}, installed) == {}


@given(st.lists(st.sampled_from(["/usr/bin", "/bin", "/venv/bin", "/opt/x"]), max_size=4))
def test_the_ranks_python_is_first_on_the_hosts_path_once(folders):
    """%allrun's pip is the ranks' (issue 49): the interpreter's folder first (not added again
    where it is first already), the rest as the caller has it."""
    env = {"PATH": ":".join(folders)} if folders else {}
    found = host_variables(env, "h", 0, 1, "/venv/bin/python3")["PATH"].split(":")
    assert found == (folders if folders[:1] == ["/venv/bin"] else ["/venv/bin"] + folders)
    assert host_variables(env, "h", 0, 1).get("PATH", "") == ":".join(folders)   # no interpreter: as given
