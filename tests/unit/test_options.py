"""The option table, slob.conf reading, precedence, validation and the click glue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from openslob.cli.params import add_options, config_from_click
from openslob.config.option import BLOCK_SIZE, Option, parse_size_bytes, parse_value
from openslob.config.options import OPTIONS, OPTIONS_BY_NAME, SLOB_KEYS_NOT_IMPLEMENTED, options_for
from openslob.config.resolve import Config, check_combination, resolve
from openslob.config.slobconf import read_slob_conf
from openslob.model.errors import ConfigError

FIXTURE = Path(__file__).parents[1] / "data" / "slob.conf"


def opt(name: str) -> Option:
    return OPTIONS_BY_NAME[name]


def parse(name: str, raw: str) -> Any:
    return parse_value(opt(name), raw)


def rejected(name: str, raw: str) -> str:
    """The ConfigError message for a value that must be refused."""
    with pytest.raises(ConfigError) as info:
        parse(name, raw)
    return str(info.value)


def write_conf(directory: Path, text: str, name: str = "slob.conf") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def as_raw(option: Option, value: Any) -> str:
    """A value as a user would type it."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --------------------------------------------------------------------------- the table


def test_table_names_are_unique_upper_snake_case() -> None:
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    assert all(n == n.upper() and " " not in n for n in names)
    assert set(OPTIONS_BY_NAME) == set(names)


def test_table_has_every_required_parameter() -> None:
    slob = {
        "SCALE", "SCAN_TABLE_SZ", "LOAD_PARALLEL_DEGREE", "UPDATE_PCT", "SCAN_PCT", "RUN_TIME",
        "WORK_LOOP", "WORK_UNIT", "REDO_STRESS", "THREADS_PER_SCHEMA", "HOT_SCHEMA_FREQUENCY",
        "DO_HOTSPOT", "HOTSPOT_MB", "HOTSPOT_OFFSET_MB", "HOTSPOT_FREQUENCY",
        "THINK_TM_FREQUENCY", "THINK_TM_MIN", "THINK_TM_MAX", "EXTERNAL_SCRIPT",
        "SQLNET_SERVICE_BASE", "SQLNET_SERVICE_MAX",
    }  # fmt: skip
    own = {"SCHEMAS", "SESSIONS", "SEED", "WARMUP", "SAMPLE_INTERVAL", "PAGE_SIZE", "REPEAT"}
    own |= {"RATE", "RATE_DIST", "COMPRESS_RATIO"}
    own |= {"INSTANCES", "SESSIONS_PER_INSTANCE", "PREFETCH", "EXTERNAL_SERIES", "TRACE_LAYERS"}
    own |= {"STEADY_STATE", "SS_WINDOW", "SS_RAMP", "STOP_ON_STEADY"}  # issue 27
    own |= {"CLIFF", "CLIFF_WINDOW", "CLIENT_PRIORITY"}
    own |= {"RESULTS_PER_S"}  # issue 30: interval results batched above it
    assert {o.name for o in OPTIONS if o.slob} == slob
    assert {o.name for o in OPTIONS if not o.slob} == own


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_flag_is_kebab_case_of_name(option: Option) -> None:
    assert option.flag == "--" + option.name.lower().replace("_", "-")
    assert option.flag.islower() and "_" not in option.flag


def test_flag_example() -> None:
    assert opt("UPDATE_PCT").flag == "--update-pct"


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_help_is_one_sentence_with_metavar(option: Option) -> None:
    assert option.help.endswith(".") and "\n" not in option.help
    assert option.metavar
    assert option.scopes and option.scopes <= {"setup", "verify", "destroy", "run", "sweep"}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_default_parses_to_itself_within_range(option: Option) -> None:
    value = parse_value(option, as_raw(option, option.default))
    assert value == option.default
    assert type(value) is type(option.default)
    if option.minimum is not None:
        assert value >= option.minimum
    if option.maximum is not None:
        assert value <= option.maximum
    if option.choices:
        assert value in option.choices


def _below(option: Option) -> str:
    assert option.minimum is not None
    step = 1 if option.kind in ("int", "blocks", "mb") else 0.05
    return as_raw(option, option.minimum - step)


@pytest.mark.parametrize(
    "option", [o for o in OPTIONS if o.minimum is not None], ids=lambda o: o.name
)
def test_below_minimum_is_rejected_in_one_line(option: Option) -> None:
    raw = _below(option)
    message = rejected(option.name, raw)
    assert message.startswith(f"{option.name}={raw} ")
    assert "allowed: " in message and "\n" not in message


@pytest.mark.parametrize(
    "option", [o for o in OPTIONS if o.maximum is not None], ids=lambda o: o.name
)
def test_above_maximum_is_rejected_in_one_line(option: Option) -> None:
    raw = as_raw(option, option.maximum + 1)
    message = rejected(option.name, raw)
    assert message.startswith(f"{option.name}={raw} is out of range (allowed: ")
    assert as_raw(option, option.maximum) in message
    assert "\n" not in message


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_minimum_and_maximum_themselves_are_accepted(option: Option) -> None:
    for bound in (option.minimum, option.maximum):
        if bound is not None:
            assert parse_value(option, as_raw(option, bound)) == bound


def test_messages_match_the_documented_wording() -> None:
    assert rejected("UPDATE_PCT", "150") == "UPDATE_PCT=150 is out of range (allowed: 0–100)"
    assert rejected("SCALE", "abc") == (
        "SCALE=abc is not a row count or size "
        "(allowed: 100–1099511627776 rows, or a size like 80M, 1G)"
    )


def test_empty_flag_value_is_rejected() -> None:
    assert rejected("UPDATE_PCT", "  ") == "UPDATE_PCT is empty (allowed: 0–100)"


def test_update_pct_accepts_any_whole_percent() -> None:
    assert [parse("UPDATE_PCT", str(p)) for p in (0, 1, 37, 51, 99, 100)] == [0, 1, 37, 51, 99, 100]


@pytest.mark.parametrize("raw", ["1.5", "1_000", "1e3", "ten", "0x10", "20%"])
def test_int_rejects_non_integers(raw: str) -> None:
    assert "is not a whole number" in rejected("UPDATE_PCT", raw)


def test_int_tolerates_surrounding_blanks() -> None:
    assert parse("WORK_UNIT", " 32 ") == 32


@pytest.mark.parametrize(("raw", "value"), [(".1", 0.1), ("0.5", 0.5), ("2", 2.0), ("1.", 1.0)])
def test_float_accepts_decimals(raw: str, value: float) -> None:
    assert parse("THINK_TM_MIN", raw) == value


@pytest.mark.parametrize("raw", ["nan", "inf", "1,5", "."])
def test_float_rejects_non_numbers(raw: str) -> None:
    assert "is not a number" in rejected("THINK_TM_MAX", raw)


# --------------------------------------------------------------------------- sizes


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        ("0", 0),
        ("123", 123),
        ("512B", 512),
        ("1K", 1024),
        ("1k", 1024),
        ("80M", 80 * 2**20),
        ("64MB", 64 * 2**20),
        ("64MiB", 64 * 2**20),
        ("1G", 2**30),
        ("1.5G", 3 * 2**29),
        (".5T", 2**39),
        ("2 G", 2 * 2**30),
    ],
)
def test_parse_size_bytes(raw: str, size: int) -> None:
    assert parse_size_bytes(raw) == size


@pytest.mark.parametrize("raw", ["", "G", "1X", "-1G", "1GG", "one G"])
def test_parse_size_bytes_rejects_garbage(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_size_bytes(raw)


@pytest.mark.parametrize(
    ("name", "raw", "value"),
    [
        ("SCALE", "80000", 80000),
        ("SCALE", "1G", 131072),
        ("SCALE", "1g", 131072),
        ("SCALE", "64MB", 8192),
        ("SCALE", "1.5G", 196608),
        ("SCALE", "80M", 10240),
        ("SCAN_TABLE_SZ", "1M", 128),
        ("SCAN_TABLE_SZ", "0", 0),
        ("SCAN_TABLE_SZ", "12K", 1),  # rounded down to whole blocks
        ("HOTSPOT_MB", "1G", 1024),
        ("HOTSPOT_MB", "8", 8),
        ("HOTSPOT_MB", "1536K", 1),
        ("HOTSPOT_OFFSET_MB", "0", 0),
        ("HOTSPOT_OFFSET_MB", "1.5G", 1536),
    ],
)
def test_sizes(name: str, raw: str, value: int) -> None:
    assert parse(name, raw) == value


def test_block_size_is_8k() -> None:
    assert BLOCK_SIZE == 8192


def test_size_that_converts_below_minimum_says_what_it_converted_to() -> None:
    message = rejected("SCALE", "64K")
    assert message.startswith("SCALE=64K (= 8 rows) is out of range (allowed: 100–")


def test_size_smaller_than_a_block_is_not_silently_zero() -> None:
    message = rejected("SCAN_TABLE_SZ", "4K")
    assert message.startswith("SCAN_TABLE_SZ=4K is smaller than one 8192-byte block")


@pytest.mark.parametrize("raw", ["1.5", "-5", "lots"])
def test_row_count_must_be_whole(raw: str) -> None:
    assert "is not a row count or size" in rejected("SCALE", raw)


def test_hotspot_mb_rejects_half_a_megabyte() -> None:
    assert rejected("HOTSPOT_MB", "512K").startswith("HOTSPOT_MB=512K (= 0 MB) is out of range")


# --------------------------------------------------------------------------- durations


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("300", 300.0),
        ("1.5", 1.5),
        ("90s", 90.0),
        ("90S", 90.0),
        ("5m", 300.0),
        ("2.5m", 150.0),
        ("2h", 7200.0),
        ("720h", 30 * 86400.0),
    ],
)
def test_durations(raw: str, seconds: float) -> None:
    assert parse("RUN_TIME", raw) == seconds


@pytest.mark.parametrize("raw", ["5x", "abc", "5 minutes", "1h30m", "m"])
def test_bad_durations(raw: str) -> None:
    message = rejected("RUN_TIME", raw)
    assert message.startswith(f"RUN_TIME={raw} is not a duration (allowed: 1–2592000 seconds")


def test_sub_second_durations() -> None:
    assert parse("SAMPLE_INTERVAL", ".5") == 0.5
    assert parse("SAMPLE_INTERVAL", "0.1s") == 0.1


def test_duration_range_applies_after_unit_conversion() -> None:
    assert rejected("RUN_TIME", "721h").startswith("RUN_TIME=721h is out of range")
    assert rejected("SAMPLE_INTERVAL", "2m").startswith("SAMPLE_INTERVAL=2m is out of range")
    assert parse("WARMUP", "0") == 0.0


# --------------------------------------------------------------------------- bools, choices


@pytest.mark.parametrize("raw", ["TRUE", "true", "True", "yes", "YES", "1", "on", "ON"])
def test_bool_true(raw: str) -> None:
    assert parse("DO_HOTSPOT", raw) is True


@pytest.mark.parametrize("raw", ["FALSE", "false", "no", "No", "0", "off", "OFF"])
def test_bool_false(raw: str) -> None:
    assert parse("DO_HOTSPOT", raw) is False


def test_bool_rejects_other_words() -> None:
    assert rejected("DO_HOTSPOT", "maybe") == (
        "DO_HOTSPOT=maybe is not TRUE or FALSE (allowed: TRUE/FALSE, YES/NO, ON/OFF, 1/0)"
    )


@pytest.mark.parametrize("raw", ["heavy", "HEAVY", "Heavy", " heavy "])
def test_redo_stress_is_case_insensitive_and_stored_upper(raw: str) -> None:
    assert parse("REDO_STRESS", raw) == "HEAVY"


def test_redo_stress_rejects_unknown_level() -> None:
    message = rejected("REDO_STRESS", "medium")
    assert message.startswith("REDO_STRESS=medium is not a valid choice (allowed: LITE, HEAVY")


def test_external_script_may_be_empty() -> None:
    assert parse("EXTERNAL_SCRIPT", "") == ""
    assert parse("EXTERNAL_SCRIPT", "/opt/slob/ext.sh") == "/opt/slob/ext.sh"


def test_values_in_messages_stay_on_one_line() -> None:
    message = rejected("UPDATE_PCT", "1\n2")
    assert "\n" not in message and message.startswith("UPDATE_PCT='1\\n2' is not")


# --------------------------------------------------------------------------- reading slob.conf


def test_quoting_comments_and_decimals(tmp_path: Path) -> None:
    conf = read_slob_conf(
        write_conf(
            tmp_path,
            "# a comment line\n"
            "\n"
            "UPDATE_PCT=25\n"
            'RUN_TIME="600"\n'
            "SCAN_PCT='5'   # trailing comment\n"
            "THINK_TM_MIN=.1\n"
            "REDO_STRESS=HEAVY# no space before the comment\n"
            "#WORK_UNIT=8\n"
            "    # indented comment\n"
            '\tSCALE="1G"  \n'
            "EXTERNAL_SCRIPT='/opt/my scripts/ext.sh'\n",
        )
    )
    assert conf.values == {
        "UPDATE_PCT": "25",
        "RUN_TIME": "600",
        "SCAN_PCT": "5",
        "THINK_TM_MIN": ".1",
        "REDO_STRESS": "HEAVY",
        "SCALE": "1G",
        "EXTERNAL_SCRIPT": "/opt/my scripts/ext.sh",
    }
    assert conf.warnings == [] and conf.notes == []
    assert conf.lines["SCALE"] == 10


def test_export_lines(tmp_path: Path) -> None:
    conf = read_slob_conf(
        write_conf(
            tmp_path,
            "export WORK_UNIT=32\nexport SCAN_PCT SCALE\nexport\nexport SCALE=200 UPDATE_PCT\n",
        )
    )
    assert conf.values == {"WORK_UNIT": "32", "SCALE": "200"}
    assert conf.warnings == []


def test_later_assignment_wins(tmp_path: Path) -> None:
    conf = read_slob_conf(write_conf(tmp_path, "UPDATE_PCT=10\nUPDATE_PCT=30\n"))
    assert conf.values["UPDATE_PCT"] == "30"
    assert conf.lines["UPDATE_PCT"] == 2


def test_several_assignments_on_one_line(tmp_path: Path) -> None:
    conf = read_slob_conf(write_conf(tmp_path, "UPDATE_PCT=10 SCAN_PCT=2\n"))
    assert conf.values == {"UPDATE_PCT": "10", "SCAN_PCT": "2"}


def test_unknown_key_warns_with_key_and_location_but_not_value(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "UPDATE_PCT=10\nMY_SECRET_TOKEN=hunter2\n")
    conf = read_slob_conf(path)
    assert conf.warnings == [f"{path}:2: unknown parameter MY_SECRET_TOKEN ignored"]
    assert "hunter2" not in " ".join(conf.warnings + conf.notes)


def test_lower_case_key_gets_a_hint(tmp_path: Path) -> None:
    conf = read_slob_conf(write_conf(tmp_path, "update_pct=10\n"))
    assert "update_pct" in conf.warnings[0] and "UPDATE_PCT" in conf.warnings[0]
    assert conf.values == {}


def test_not_implemented_keys_give_notes_without_values(tmp_path: Path) -> None:
    path = write_conf(
        tmp_path,
        'DBA_PRIV_USER="system"\n'
        'SYSDBA_PASSWD="s3cr3t-pw"\n'
        "SYSDBA_PASSWD=another-pw\n"
        "DATABASE_STATISTICS_TYPE=awr   # Permitted values: [statspack|awr]\n"
        "SHARED_DATA_MODULUS=0\n",
    )
    conf = read_slob_conf(path)
    assert conf.warnings == []
    text = "\n".join(conf.notes)
    assert "s3cr3t-pw" not in text and "another-pw" not in text and "awr" not in text
    assert len(conf.notes) == 4  # one note per key, however often it is assigned
    assert conf.notes[1].startswith(f"{path}:2: SYSDBA_PASSWD is accepted but not used")
    assert {n.split(": ")[1].split()[0] for n in conf.notes} == {
        "DBA_PRIV_USER",
        "SYSDBA_PASSWD",
        "DATABASE_STATISTICS_TYPE",
        "SHARED_DATA_MODULUS",
    }


def test_not_implemented_list_has_reasons_and_no_overlap_with_table() -> None:
    keys = [k for k, _ in SLOB_KEYS_NOT_IMPLEMENTED]
    assert len(keys) == len(set(keys))
    assert not set(keys) & set(OPTIONS_BY_NAME)
    assert all(reason for _, reason in SLOB_KEYS_NOT_IMPLEMENTED)
    assert "SYSDBA_PASSWD" in keys


def test_lines_that_are_not_assignments_warn(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "source other.conf\nrunit.sh 4\nSCALE=200\nFOO = 1\n")
    conf = read_slob_conf(path)
    assert conf.values == {"SCALE": "200"}
    assert [w.split(": ")[0] for w in conf.warnings] == [f"{path}:{n}" for n in (1, 2, 4)]
    assert all("not a KEY=VALUE assignment; line ignored" in w for w in conf.warnings)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("UPDATE_PCT = 50", "UPDATE_PCT not read (not a KEY=VALUE assignment)"),
        ("export SCAN_PCT=5 runit.sh", "SCAN_PCT not read (not a KEY=VALUE assignment)"),
        ("UPDATE_PCT='50", "unbalanced quotes in the line for UPDATE_PCT"),
        ('SYSDBA_PASSWD="s3cr3t', "unbalanced quotes: bash would read the lines after it"),
        ("RUN_TIME=\x02", "RUN_TIME not read (control characters in the line)"),
    ],
)
def test_a_malformed_line_for_a_known_key_stops_the_command(
    tmp_path: Path, line: str, expected: str
) -> None:
    """A run with the default instead of the value the file tried to set is not the run
    asked for: the line is named and nothing runs (exit 2). Values are never echoed."""
    path = write_conf(tmp_path, f"# SLOB settings\nSCALE=200\n{line}\nWORK_UNIT=8\n")
    with pytest.raises(ConfigError) as raised:
        resolve({}, path, cwd=tmp_path)
    assert str(raised.value).startswith(f"{path}:3: ")
    assert expected in str(raised.value)
    assert "s3cr3t" not in str(raised.value) and raised.value.exit_code == 2


def test_a_binary_file_is_not_a_slob_conf(tmp_path: Path) -> None:
    path = tmp_path / "slob.conf"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00UPDATE_PCT=50\n")
    with pytest.raises(ConfigError, match=r"not a text file \(NUL bytes at offset 7\)"):
        resolve({}, path, cwd=tmp_path)


def test_external_script_is_checked_before_anything_runs(tmp_path: Path) -> None:
    script = tmp_path / "ext.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    cases = {
        str(script): f"EXTERNAL_SCRIPT={script}: not executable (chmod +x {script})",
        str(tmp_path / "gone.sh"): f"EXTERNAL_SCRIPT={tmp_path / 'gone.sh'}: no such file",
        str(tmp_path): f"EXTERNAL_SCRIPT={tmp_path}: a directory, not a program",
        "no-such-hook-xyz": "EXTERNAL_SCRIPT=no-such-hook-xyz: no such command on PATH",
    }
    for value, message in cases.items():
        with pytest.raises(ConfigError) as raised:
            resolve({"EXTERNAL_SCRIPT": value}, None, cwd=tmp_path, scope="run")
        assert str(raised.value) == message and raised.value.exit_code == 2
    # setup never calls the hook: it is not refused there
    assert resolve({"EXTERNAL_SCRIPT": str(script)}, None, cwd=tmp_path, scope="setup")
    script.chmod(0o755)
    assert resolve({"EXTERNAL_SCRIPT": str(script)}, None, cwd=tmp_path)["EXTERNAL_SCRIPT"]
    assert resolve({"EXTERNAL_SCRIPT": "true"}, None, cwd=tmp_path)["EXTERNAL_SCRIPT"] == "true"


def test_variable_expansion(tmp_path: Path) -> None:
    conf = read_slob_conf(
        write_conf(
            tmp_path,
            "UNIT=32\n"
            "DIR=/opt/slob\n"
            "WORK_UNIT=$UNIT\n"
            'EXTERNAL_SCRIPT="${DIR}/misc/external script.sh"\n'
            "REDO_STRESS='$LITERAL'\n"
            "SCAN_PCT=${NOT_SET:-7}\n"
            "UPDATE_PCT=${UNIT:-99}\n"
            "WARMUP=${EMPTY:=3}\n",
        )
    )
    assert conf.values["WORK_UNIT"] == "32"
    assert conf.values["EXTERNAL_SCRIPT"] == "/opt/slob/misc/external script.sh"
    assert conf.values["REDO_STRESS"] == "$LITERAL"  # single quotes: no expansion
    assert conf.values["SCAN_PCT"] == "7"
    assert conf.values["UPDATE_PCT"] == "32"
    assert conf.values["WARMUP"] == "3"
    # UNIT and DIR are not openslob parameters: warned about, yet usable as variables.
    assert all("unknown parameter" in w for w in conf.warnings)


def test_expansion_uses_only_earlier_assignments(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "WORK_UNIT=$LATER\nLATER=8\n")
    conf = read_slob_conf(path)
    assert conf.values["WORK_UNIT"] == "$LATER"
    assert f"{path}:1: $LATER is not set earlier in this file" in conf.warnings[0]


def test_unknown_variable_reaches_validation(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "WORK_UNIT=${ORACLE_UNIT}\n")
    with pytest.raises(ConfigError, match=r"WORK_UNIT=\$\{ORACLE_UNIT\} is not a whole number"):
        resolve({}, path, cwd=tmp_path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no such slob\.conf"):
        read_slob_conf(tmp_path / "nope.conf")


# --------------------------------------------------------------------------- the SLOB fixture


def test_real_slob_conf_reads_cleanly() -> None:
    conf = read_slob_conf(FIXTURE)
    assert conf.warnings == []
    assert conf.values == {
        "UPDATE_PCT": "20",
        "SCAN_PCT": "0",
        "RUN_TIME": "300",
        "WORK_LOOP": "0",
        "SCALE": "80000",
        "SCAN_TABLE_SZ": "1M",
        "WORK_UNIT": "64",
        "REDO_STRESS": "LITE",
        "LOAD_PARALLEL_DEGREE": "2",
        "THREADS_PER_SCHEMA": "1",
        "EXTERNAL_SCRIPT": "",
        "DO_HOTSPOT": "FALSE",
        "HOTSPOT_MB": "8",
        "HOTSPOT_OFFSET_MB": "16",
        "HOTSPOT_FREQUENCY": "3",
        "HOT_SCHEMA_FREQUENCY": "0",
        "THINK_TM_FREQUENCY": "0",
        "THINK_TM_MIN": ".1",
        "THINK_TM_MAX": ".5",
        "SQLNET_SERVICE_BASE": "",  # multi-instance runs; SQLNET_SERVICE_MAX is commented out
    }
    noted = {n.split(": ")[1].split()[0] for n in conf.notes}
    assert noted == {
        "DATABASE_STATISTICS_TYPE",
        "ADMIN_SQLNET_SERVICE",
        "DBA_PRIV_USER",
        "SYSDBA_PASSWD",
    }
    assert not any("manager" in n or "change_on_install" in n for n in conf.notes)


def test_real_slob_conf_resolves() -> None:
    config = resolve({}, FIXTURE, cwd=FIXTURE.parent, scope="run")
    assert config["SCALE"] == 80000
    assert config["SCAN_TABLE_SZ"] == 128
    assert config["THINK_TM_MIN"] == 0.1 and config["THINK_TM_MAX"] == 0.5
    assert config["RUN_TIME"] == 300.0
    assert config["DO_HOTSPOT"] is False
    assert config["EXTERNAL_SCRIPT"] == ""
    assert config.sources["SCALE"] == "file"
    assert config.sources["SCHEMAS"] == "default"
    assert config.conf_path == FIXTURE
    assert "manager" not in json.dumps(config.as_dict())


# --------------------------------------------------------------------------- precedence


def test_defaults_without_any_file(tmp_path: Path) -> None:
    config = resolve({}, None, cwd=tmp_path)
    assert config.conf_path is None
    assert config.as_dict() == {o.name: o.default for o in OPTIONS}
    assert set(config.sources.values()) == {"default"}


def test_file_overrides_defaults_and_flags_override_file(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "UPDATE_PCT=30\nSCAN_PCT=5\n")
    config = resolve({"UPDATE_PCT": "45", "SCAN_PCT": None}, path, cwd=tmp_path)
    assert config["UPDATE_PCT"] == 45 and config.sources["UPDATE_PCT"] == "flag"
    assert config["SCAN_PCT"] == 5 and config.sources["SCAN_PCT"] == "file"
    assert config["RUN_TIME"] == 300.0 and config.sources["RUN_TIME"] == "default"


def test_flag_overriding_a_bad_file_value_wins(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "UPDATE_PCT=500\n")
    assert resolve({"UPDATE_PCT": "10"}, path, cwd=tmp_path)["UPDATE_PCT"] == 10


def test_slob_conf_in_cwd_is_picked_up(tmp_path: Path) -> None:
    write_conf(tmp_path, "WORK_UNIT=16\n")
    config = resolve({}, None, cwd=tmp_path)
    assert config["WORK_UNIT"] == 16
    assert config.conf_path == tmp_path / "slob.conf"


def test_explicit_conf_is_relative_to_cwd(tmp_path: Path) -> None:
    write_conf(tmp_path, "WORK_UNIT=16\n", name="mine.conf")
    write_conf(tmp_path, "WORK_UNIT=8\n")
    assert resolve({}, "mine.conf", cwd=tmp_path)["WORK_UNIT"] == 16


def test_missing_conf_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--conf missing\.conf: no such file$") as info:
        resolve({}, "missing.conf", cwd=tmp_path)
    assert info.value.exit_code == 2


def test_file_errors_name_file_and_line(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "\nUPDATE_PCT=150\n")
    with pytest.raises(ConfigError) as info:
        resolve({}, path, cwd=tmp_path)
    assert str(info.value) == f"{path}:2: UPDATE_PCT=150 is out of range (allowed: 0–100)"


def test_flag_errors_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve({"UPDATE_PCT": "150"}, None, cwd=tmp_path)
    assert str(info.value) == "--update-pct: UPDATE_PCT=150 is out of range (allowed: 0–100)"


def test_empty_value_in_file_means_default(tmp_path: Path) -> None:
    # SLOB's scripts read every key as ${KEY:=default}, so KEY= means "use the default".
    config = resolve({}, write_conf(tmp_path, 'UPDATE_PCT=\nSCALE=""\n'), cwd=tmp_path)
    assert config["UPDATE_PCT"] == 20 and config.sources["UPDATE_PCT"] == "default"
    assert config["SCALE"] == 8192


def test_relative_external_script_is_relative_to_the_conf_file(tmp_path: Path) -> None:
    conf_dir = tmp_path / "SLOB"
    (conf_dir / "misc").mkdir(parents=True)
    (conf_dir / "misc" / "ext.sh").write_text("#!/bin/sh\n")
    (conf_dir / "misc" / "ext.sh").chmod(0o755)
    path = write_conf(conf_dir, "EXTERNAL_SCRIPT=./misc/ext.sh\n")
    config = resolve({}, path, cwd=tmp_path)
    assert config["EXTERNAL_SCRIPT"] == str(conf_dir / "misc" / "ext.sh")
    flagged = resolve({"EXTERNAL_SCRIPT": "/bin/true"}, path, cwd=tmp_path)
    assert flagged["EXTERNAL_SCRIPT"] == "/bin/true"


def test_notes_and_warnings_reach_the_config(tmp_path: Path) -> None:
    path = write_conf(tmp_path, "SYSDBA_PASSWD=Xyzzy42\nFOO=1\n")
    config = resolve({}, path, cwd=tmp_path)
    assert len(config.notes) == 1 and len(config.warnings) == 1
    assert "Xyzzy42" not in config.notes[0]


def test_password_with_dollars_leaks_nothing(tmp_path: Path) -> None:
    path = write_conf(tmp_path, 'SYSDBA_PASSWD="pa$$word$secret"\nDBA_PRIV_USER=$HOME\n')
    conf = read_slob_conf(path)
    assert conf.warnings == []
    assert not any("secret" in n or "pa$" in n for n in conf.notes)


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "slob.conf"
    path.write_bytes(b"\xef\xbb\xbfUPDATE_PCT=30\n")
    conf = read_slob_conf(path)
    assert conf.values == {"UPDATE_PCT": "30"} and conf.warnings == []


def test_unknown_flag_name_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="NOT_AN_OPTION"):
        resolve({"NOT_AN_OPTION": "1"}, None, cwd=tmp_path)


# --------------------------------------------------------------------------- Config


def test_config_is_an_immutable_mapping(tmp_path: Path) -> None:
    config = resolve({}, None, cwd=tmp_path)
    assert isinstance(config, Config)
    assert len(config) == len(OPTIONS) and list(config) == [o.name for o in OPTIONS]
    assert config.get("UPDATE_PCT") == 20 and "SCALE" in config
    with pytest.raises(TypeError):
        config.params["UPDATE_PCT"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        config.sources["UPDATE_PCT"] = "flag"  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.conf_path = tmp_path  # type: ignore[misc]


def test_as_dict_is_json_with_every_parameter(tmp_path: Path) -> None:
    config = resolve({"SCALE": "1G", "DO_HOTSPOT": "yes"}, None, cwd=tmp_path)
    data = json.loads(json.dumps(config.as_dict()))
    assert list(data) == [o.name for o in OPTIONS]
    assert data["SCALE"] == 131072 and data["DO_HOTSPOT"] is True


def test_session_count(tmp_path: Path) -> None:
    flags = {"SCHEMAS": "8", "THREADS_PER_SCHEMA": "4"}
    assert resolve(flags, None, cwd=tmp_path).session_count == 32
    assert resolve({**flags, "SESSIONS": "5"}, None, cwd=tmp_path).session_count == 5


# --------------------------------------------------------------------------- cross checks


def combination_error(tmp_path: Path, scope: str | None = None, **flags: str) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(flags, None, cwd=tmp_path, scope=scope)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_scale_must_exceed_two_work_units(tmp_path: Path) -> None:
    message = combination_error(tmp_path, SCALE="128", WORK_UNIT="64")
    assert "SCALE=128" in message and "WORK_UNIT=64" in message
    assert resolve({"SCALE": "129", "WORK_UNIT": "64"}, None, cwd=tmp_path)["SCALE"] == 129


def test_think_time_min_not_above_max(tmp_path: Path) -> None:
    message = combination_error(tmp_path, THINK_TM_MIN="2", THINK_TM_MAX=".5")
    assert message == "THINK_TM_MIN=2 must not exceed THINK_TM_MAX=0.5"
    assert resolve({"THINK_TM_MIN": ".5", "THINK_TM_MAX": ".5"}, None, cwd=tmp_path)


def test_scan_pct_needs_a_scan_table(tmp_path: Path) -> None:
    message = combination_error(tmp_path, SCAN_PCT="10", SCAN_TABLE_SZ="0")
    assert "SCAN_PCT=10" in message and "SCAN_TABLE_SZ=0" in message
    assert resolve({"SCAN_PCT": "0", "SCAN_TABLE_SZ": "0"}, None, cwd=tmp_path)


def test_hotspot_must_fit_in_the_table(tmp_path: Path) -> None:
    # SCALE=2048 rows = 16 MiB; offset 16 + 8 MB does not fit.
    message = combination_error(tmp_path, SCALE="2048", DO_HOTSPOT="TRUE")
    assert "HOTSPOT_OFFSET_MB=16" in message and "HOTSPOT_MB=8" in message
    assert "SCALE=2048" in message
    # exactly fitting is fine; without DO_HOTSPOT the region is irrelevant
    assert resolve({"SCALE": "24M", "DO_HOTSPOT": "TRUE"}, None, cwd=tmp_path)
    assert resolve({"SCALE": "2048"}, None, cwd=tmp_path)


def test_sessions_are_capped(tmp_path: Path) -> None:
    message = combination_error(tmp_path, SCHEMAS="128", THREADS_PER_SCHEMA="64")
    assert "SCHEMAS=128" in message and "THREADS_PER_SCHEMA=64" in message
    assert resolve(
        {"SCHEMAS": "128", "THREADS_PER_SCHEMA": "64", "SESSIONS": "256"}, None, cwd=tmp_path
    )


def test_checks_are_limited_to_what_the_command_uses(tmp_path: Path) -> None:
    # setup never draws keys or thinks, so a run-only problem must not block loading data.
    write_conf(tmp_path, "SCALE=100\nWORK_UNIT=64\nTHINK_TM_MIN=3\nTHINK_TM_MAX=1\n")
    assert resolve({}, None, cwd=tmp_path, scope="setup")["SCALE"] == 100
    with pytest.raises(ConfigError, match="WORK_UNIT"):
        resolve({}, None, cwd=tmp_path, scope="run")


def test_check_combination_accepts_the_defaults(tmp_path: Path) -> None:
    check_combination(resolve({}, None, cwd=tmp_path))


# --------------------------------------------------------------------------- click


def make_command(scope: str) -> click.Command:
    @click.command(context_settings={"max_content_width": 400})
    @add_options(scope)
    @click.option("--label", default="x")
    def command(label: str, **kwargs: Any) -> None:
        config = config_from_click(kwargs, scope)
        assert kwargs == {}, "every option keyword must be consumed"
        sources = dict(config.sources)
        click.echo(json.dumps({"label": label, "config": config.as_dict(), "src": sources}))

    return command


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)  # keep any ./slob.conf of the developer out of the tests
    return CliRunner()


def test_help_lists_every_run_flag(runner: CliRunner) -> None:
    result = runner.invoke(make_command("run"), ["--help"], terminal_width=400)
    assert result.exit_code == 0, result.output
    for option in OPTIONS:
        if "run" in option.scopes:
            assert f"{option.flag} {option.metavar}" in result.output
    assert "--conf FILE" in result.output
    assert "--load-parallel-degree" not in result.output
    assert "[default: 20%; allowed: 0–100; slob.conf UPDATE_PCT]" in result.output


def test_help_follows_table_order(runner: CliRunner) -> None:
    output = runner.invoke(make_command("run"), ["--help"], terminal_width=400).output
    positions = [output.index(o.flag + " ") for o in options_for("run")]
    assert positions == sorted(positions)
    assert output.index("--conf") < positions[0]


def test_setup_and_verify_scopes(runner: CliRunner) -> None:
    setup = runner.invoke(make_command("setup"), ["--help"]).output
    verify = runner.invoke(make_command("verify"), ["--help"]).output
    for flag in ("--scale", "--scan-table-sz", "--schemas", "--seed"):
        assert flag in setup and flag in verify
    assert "--load-parallel-degree" in setup and "--load-parallel-degree" not in verify
    assert "--update-pct" not in setup and "--run-time" not in verify


def test_unknown_scope_fails_loudly() -> None:
    with pytest.raises(ValueError, match="unknown scope"):
        add_options("runn")


def test_flags_reach_the_config(runner: CliRunner, tmp_path: Path) -> None:
    write_conf(tmp_path, "UPDATE_PCT=30\nRUN_TIME=60\n")
    result = runner.invoke(
        make_command("run"),
        ["--update-pct", "45", "--scale", "1G", "--redo-stress", "heavy", "--label", "y"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["label"] == "y"
    assert data["config"]["UPDATE_PCT"] == 45 and data["src"]["UPDATE_PCT"] == "flag"
    assert data["config"]["RUN_TIME"] == 60.0 and data["src"]["RUN_TIME"] == "file"
    assert data["config"]["SCALE"] == 131072
    assert data["config"]["REDO_STRESS"] == "HEAVY"


def test_conf_flag(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(make_command("setup"), ["--conf", str(FIXTURE)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["config"]["SCALE"] == 80000


def test_bad_flag_raises_config_error(runner: CliRunner) -> None:
    result = runner.invoke(make_command("run"), ["--update-pct", "150"])
    assert isinstance(result.exception, ConfigError)
    assert str(result.exception) == "--update-pct: UPDATE_PCT=150 is out of range (allowed: 0–100)"


def test_obfuscate_columns_maps_to_the_incompressible_default(tmp_path: Path) -> None:
    """SLOB's OBFUSCATE_COLUMNS asks for data storage cannot shrink: openslob's default."""
    conf = read_slob_conf(write_conf(tmp_path, "OBFUSCATE_COLUMNS=TRUE\nSCALE=200\n"))
    assert conf.values == {"SCALE": "200"} and not conf.warnings
    assert any("OBFUSCATE_COLUMNS" in n and "COMPRESS_RATIO=1" in n for n in conf.notes)
    config = resolve({}, conf.path, cwd=tmp_path)
    assert config["COMPRESS_RATIO"] == 1.0


def test_compress_ratio_is_a_bounded_number(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, "COMPRESS_RATIO=2.5\n")
    assert resolve({}, conf, cwd=tmp_path)["COMPRESS_RATIO"] == 2.5
    with pytest.raises(ConfigError, match="COMPRESS_RATIO"):
        resolve({"COMPRESS_RATIO": "9"}, None, cwd=tmp_path)
