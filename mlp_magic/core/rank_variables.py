"""The environment variables that give a process its place in a job, listed once (pure).

Who reads them: a rank asking who it is (``engine/identity``, ``helpers.local_rank``), the
scanner telling other processes' ranks apart (``core/proc_ranks``), and what a command run once
per host must not inherit (``core/host_command``). The World sets torch's own (``TORCH``) for
``init_process_group("env://")``.
"""

# Plain engines (no MPI launcher): numbered by the World, which names itself by its run folder.
WORLD_RANK, WORLD_SIZE, WORLD_ID = "MLP_MAGIC_RANK", "MLP_MAGIC_WORLD_SIZE", "MLP_MAGIC_WORLD_ID"
# A rank started again by ``%mpirun --respawn`` (MPI_Comm_spawn): its launcher's variables say rank
# 0 of a job of 1 (the spawned job's), so the rank it stands for, and the World's size, come in these.
RESPAWNED_RANK, RESPAWNED_SIZE = "MLP_MAGIC_RESPAWNED_RANK", "MLP_MAGIC_RESPAWNED_SIZE"
# An MPI launcher's rank, per family: Open MPI, any PMIx launcher, PMI (MPICH's Hydra, Intel MPI,
# Slurm): with its world size. Open MPI sets both its own and PMIx's; they agree.
MPI_RANK_SIZE = {"OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_SIZE", "PMIX_RANK": "PMIX_SIZE",
                 "PMI_RANK": "PMI_SIZE"}
MPI_RANK = tuple(MPI_RANK_SIZE)
MPI_LOCAL_RANK = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK")
# torch.distributed's (torchrun sets them; so does the World, for env:// initialisation).
TORCH_RANK, TORCH_LOCAL_RANK, TORCH_WORLD_SIZE = "RANK", "LOCAL_RANK", "WORLD_SIZE"
TORCH = (TORCH_RANK, TORCH_WORLD_SIZE, TORCH_LOCAL_RANK, "LOCAL_WORLD_SIZE", "NODE_RANK",
         "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
# TensorFlow's cluster and this process's task in it, as Azure ML sets it for a TensorFlow job
# (the World sets it per rank: world/pure/tf_config).
TENSORFLOW = ("TF_CONFIG",)
# A rank's own number, most specific first: a respawned rank's, then the World's numbering, since
# plain engines may inherit a launcher's variables from the kernel.
OWN_RANK = (RESPAWNED_RANK, WORLD_RANK, *MPI_RANK)
# A rank's number on its host: torch's first (under torchrun it is the worker's, not the agent's).
OWN_LOCAL_RANK = (TORCH_LOCAL_RANK, *MPI_LOCAL_RANK)
