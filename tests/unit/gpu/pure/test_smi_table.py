"""nvidia-smi's table as pasted in bug reports: the real captures in tests/fixtures/nvml/, round
trips of generated tables, and garbage that never escapes as anything but one MlpMagicError."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.errors import MlpMagicError
from mlp_magic.gpu.pure.smi_table import SmiGpu, SmiProcess, SmiTable, format_smi_table, parse_smi_tables

from tests.unit.fuzz_checks import FUZZ, JUNK, only_our_error

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "nvml"
CAPTURES = sorted(FIXTURES.glob("*.txt"))


def table_of(name: str) -> SmiTable:
    tables = parse_smi_tables((FIXTURES / name).read_text())
    assert len(tables) == 1
    return tables[0]


def test_every_capture_names_where_it_came_from_and_parses():
    assert len(CAPTURES) >= 6
    for path in CAPTURES:
        assert path.read_text().startswith("# https://github.com/"), path.name
        assert parse_smi_tables(path.read_text()), path.name


def test_the_allgather_hang_one_gpu_busy_the_others_idle():
    table = table_of("nccl-1550-h100-allgather-hang.txt")
    assert [g.util_pct for g in table.gpus] == [100, 0, 0, 0]
    assert [g.power_w for g in table.gpus] == [152.0, 129.0, 137.0, 135.0]
    first = table.gpus[0]
    assert (first.name, first.bus_id, first.temp_c, first.perf, first.power_cap_w) == (
        "NVIDIA H100 80GB HBM3", "00000000:04:00.0", 38, "P0", 700.0)
    assert (first.memory_used_mib, first.memory_total_mib, first.ecc_uncorrected, first.fan_pct) == (
        75370, 81559, 0, None)
    assert (first.compute_mode, first.mig_mode, table.gpus[3].mig_mode) == ("Default", "Disabled", None)
    assert table.driver_version is None   # the excerpt starts below the header


def test_the_header_gives_the_driver_and_cuda_versions():
    table = table_of("gpu-burn-114-h100.txt")   # after a shell prompt and the date
    assert (table.driver_version, table.cuda_version) == ("550.90.07", "12.4")
    assert [(g.index, g.util_pct, g.bus_id) for g in table.gpus] == [(0, 0, "00000000:19:00.0"),
                                                                     (1, 4, "00000000:3B:00.0")]


def test_the_older_layouts():
    miner = table_of("ethereum-miner-monitor-5-gtx1070.txt")   # driver 390, tab-indented, fans at 100%
    assert [(g.fan_pct, g.util_pct, g.power_w, g.ecc_uncorrected, g.display_active) for g in miner.gpus] == [
        (100, 100, 101.0, None, "On"), (100, 0, 98.0, None, "On"), (100, 0, 100.0, None, "On")]
    assert (miner.driver_version, miner.cuda_version) == ("390.25", None)
    t4 = table_of("accelerate-233-t4-stuck.txt")
    assert [g.util_pct for g in t4.gpus] == [100, 100, 100] and t4.gpus[0].persistence == "Off"
    v100 = table_of("yolov5-2491-v100-stuck.txt")   # driver 450: a "MIG M." line of N/A
    assert [(g.name, g.mig_mode) for g in v100.gpus] == [("Tesla V100-PCIE...", None)] * 2


def test_processes_tables_of_both_layouts():
    a100 = table_of("dcgm-83-a100-processes.txt")   # starts at GPU 6's record
    assert [g.index for g in a100.gpus] == [6, 7]
    assert a100.processes == (SmiProcess(0, 3518784, "C", "python3", 452),)
    mask = table_of("mask2former-74-v100-processes.txt")
    assert mask.gpus == () and [(p.gpu, p.pid, p.used_mib) for p in mask.processes][:2] == [
        (0, 18684, 13195), (1, 18685, 13223)]
    assert len(mask.processes) == 6 and {p.name for p in mask.processes} == {"/usr/bin/python3"}
    old = table_of("diamorphine-13-v100-old-processes.txt")
    assert old.processes == () and old.gpus[0].name == "Tesla V100-DGXS..."
    rows = "| Processes:  GPU Memory |\n|  GPU       PID   Type   Process name   Usage |\n|=====|\n" \
           "|    0     12345      C   /usr/bin/python   1250MiB |\n|    1      678    C+G   a b c     N/A |\n"
    assert parse_smi_tables(rows)[0].processes == (SmiProcess(0, 12345, "C", "/usr/bin/python", 1250),
                                                   SmiProcess(1, 678, "C+G", "a b c", None))


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_captures_survive_a_round_trip(path):
    tables = parse_smi_tables(path.read_text())
    assert parse_smi_tables("".join(format_smi_table(t) for t in tables)) == tables


def test_several_tables_in_one_text_are_read_in_order():
    names = ("gpu-burn-114-h100.txt", "nccl-1967-h100-p2p-hang.txt")
    text = "\n".join((FIXTURES / name).read_text() for name in names)
    assert [t.driver_version for t in parse_smi_tables(text)] == ["550.90.07", "560.35.03"]


RECORD = "|   0  G   On  | 0000:04:00.0 Off | 0 |\n| N/A 1C P0 1W / 2W | 1MiB / 2MiB | 1% Default |\n"


@pytest.mark.parametrize("text, line, words", [
    ("|   0  NVIDIA H100   On  |   00000000:04:00.0 Off |    0 |\n", 1, "cut short"),
    ("|   0  NVIDIA H100   On  |   00000000:04:00.0 Off |    0 |\n"
     "| N/A   38X    P0   152W /  700W |   75370MiB /  81559MiB |  100%  Default |\n", 2, "temperature"),
    ("|===|\n" + RECORD + RECORD, 4, "GPU 0 after GPU 0"),
    ("|===|\n" + RECORD.replace("1MiB / 2MiB", "lots"), 3, "memory"),
    ("hello\n| a markdown | table |\n", 2, "not a line"),
    ("| Processes: |\n|  GPU GI CI PID Type Process name  Usage |\n|===|\n| 0 N/A N/A x C python 1MiB |\n",
     4, "process"),
])
def test_bad_lines_are_named_by_number(text, line, words):
    with pytest.raises(MlpMagicError) as raised:
        parse_smi_tables(text)
    assert f"line {line}:" in str(raised.value) and words in str(raised.value)


def test_text_without_a_table_is_one_error():
    with pytest.raises(MlpMagicError, match="no GPU record"):
        parse_smi_tables("Fri Oct 25 11:21:22 2024\n```\n")


# ---------------------------------------------------------------- generated tables

NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 .\-]{0,30}[A-Za-z0-9.]", fullmatch=True)
BUS_IDS = st.from_regex(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", fullmatch=True)
STATES = st.sampled_from(["On", "Off", None])
PERF = st.integers(0, 15).map(lambda p: f"P{p}")
SMALL = st.integers(0, 10 ** 6)
TENTHS = st.integers(0, 10 ** 7).map(lambda n: n / 10)


@st.composite
def gpus(draw, index: int) -> SmiGpu:
    return SmiGpu(index, draw(NAMES), draw(STATES), draw(BUS_IDS),
                  draw(STATES), draw(st.none() | SMALL), draw(st.none() | st.integers(0, 100)),
                  draw(st.none() | st.integers(0, 200)), draw(st.none() | PERF),
                  draw(st.none() | TENTHS), draw(st.none() | TENTHS), draw(SMALL), draw(SMALL),
                  draw(st.none() | st.integers(0, 100)),
                  draw(st.sampled_from(["Default", "E. Process", "Prohibited", "E. Thread"])),
                  draw(st.sampled_from([None, "Disabled", "Enabled"])))


PROGRAMS = st.from_regex(r"[A-Za-z0-9/_.\-][A-Za-z0-9/_. \-]{0,40}[A-Za-z0-9/_.\-]", fullmatch=True)
PROCESSES = st.builds(SmiProcess, st.integers(0, 15), st.integers(1, 2 ** 22),
                      st.sampled_from(["C", "G", "C+G", "M"]), PROGRAMS,
                      st.none() | SMALL, st.none() | st.integers(0, 14), st.none() | st.integers(0, 14))


@st.composite
def tables(draw) -> SmiTable:
    indices = sorted(draw(st.sets(st.integers(0, 63), max_size=8)))
    driver = draw(st.none() | st.from_regex(r"[0-9]{3}\.[0-9]{2,3}(\.[0-9]{2})?", fullmatch=True))
    cuda = draw(st.none() | st.sampled_from(["12.4", "11.0"])) if driver else None
    processes = tuple(draw(st.lists(PROCESSES, max_size=5)))
    found = SmiTable(driver, cuda, tuple(draw(gpus(i)) for i in indices), processes)
    return found if found.gpus or found.processes else SmiTable(driver, cuda, (), (draw(PROCESSES),))


@FUZZ
@given(st.lists(tables(), min_size=1, max_size=3))
def test_generated_tables_round_trip(generated):
    assert parse_smi_tables("\n".join(format_smi_table(t) for t in generated)) == generated


# ---------------------------------------------------------------- garbage

LINES = [line for path in CAPTURES for line in path.read_text().splitlines()]


TABLE_CHARACTERS = st.text(st.sampled_from("|+=- 0123456789NA/WMiBC%P.:\n"), max_size=300)


@st.composite
def damaged(draw) -> str:
    """Lines of real captures, some cut, some swapped, some joined with junk."""
    lines = draw(st.lists(st.sampled_from(LINES), min_size=1, max_size=12))
    out = []
    for line in lines:
        how = draw(st.integers(0, 4))
        if how == 1:
            line = line[: draw(st.integers(0, len(line)))]
        elif how == 2:
            at = draw(st.integers(0, len(line)))
            line = line[:at] + draw(JUNK) + line[at:]
        elif how == 3:
            line = line.replace(draw(st.sampled_from(["MiB", "W", "%", "C", "|", "N/A", " "])), draw(JUNK), 1)
        out.append(line)
    return "\n".join(out)


@FUZZ
@given(damaged() | st.text(max_size=300) | TABLE_CHARACTERS)
def test_damaged_or_random_text_is_read_or_refused_in_one_line(text):
    found, message = only_our_error(parse_smi_tables, text)
    if message is None:
        assert found and all(isinstance(t, SmiTable) for t in found)
    else:
        assert message.startswith("nvidia-smi table")
