"""agent/launch: what the World says when some hosts' agents did not start (hypothesis)."""
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.agent.launch import _why, agents_note
from mlp_magic.client.remote_errors import Failed

HOSTS = st.text("abcw0123-.", min_size=1, max_size=8)
ONE_LINE = st.text(min_size=1, max_size=40).filter(lambda text: "\n" not in text)
ENTRY = st.one_of(st.fixed_dictionaries({"addr": st.just("10.0.0.1"), "port": st.integers(1, 65535)}),
                  st.fixed_dictionaries({"error": ONE_LINE}))


@given(st.dictionaries(HOSTS, ENTRY, max_size=6))
def test_one_line_names_the_first_failed_host_and_counts_the_others(agents):
    failed = [host for host, entry in agents.items() if "error" in entry]
    note = agents_note(agents)
    if not failed:
        assert note is None
        return
    first = failed[0]
    assert note.startswith(f"mlp_magic: no live GPU readings from {first}") and "\n" not in note
    assert note.endswith(agents[first]["error"])
    assert (f"(and {len(failed) - 1} more hosts)" in note) == (len(failed) > 1)


def test_a_failed_start_reads_as_our_own_words_or_the_engines():
    assert _why(Failed("MlpMagicError: the GPU agent did not start: it exited")) == \
        "the GPU agent did not start: it exited"
    assert _why(Failed("EngineError: Engine 3 died while running task")) == \
        "EngineError: Engine 3 died while running task"
    assert _why(None).startswith("unexpected answer from the engine: None")
