"""A World running as root says so in its description, which is its start line and --status."""
from mlp_magic.machine.topology import topology_from_environment
from mlp_magic.world.world import World, WorldSpec


def test_a_world_as_root_says_so_and_one_that_is_not_does_not():
    world = World(WorldSpec(topology_from_environment({}), 2, oversubscribe=True))
    world.as_root = True
    assert world.describe().startswith("World of 2 ranks (no MPI, ")
    assert ", as root), stopped: " in world.describe()
    world.as_root = False
    assert "root" not in world.describe()
