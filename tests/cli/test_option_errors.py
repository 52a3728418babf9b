"""Every option error is one line on stderr naming the option (or its variable), the value
and what was expected, exit code 2; typer's and pydantic's wording never shows."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any, Literal, get_origin

import pytest
import typer
import yaml
from typer.testing import CliRunner

from scaler.cli import app
from tests.support.policies import case_target_doc

TIME_FORMS = (
    "RFC 3339 (2025-05-01T12:00:00Z), now, now-6h, a duration ago (2h or 2h ago) or Unix seconds"
)


def _error(args: list[str], env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    return line


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ["check-policy", "-o", "yaml", "p.yaml"],
            "vllm-scaler: --output: value 'yaml': expected one of text, json",
            id="output-choice",
        ),
        pytest.param(
            ["run", "--interval", "abc"],
            "vllm-scaler: VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval): value 'abc': expected"
            " a duration: seconds (90) or a number with a unit ms, s, m, h, d, w or y (90s, 5m, "
            "1.5m, 1h30m)",
            id="interval-number",
        ),
        pytest.param(
            ["run", "--metrics-port", "1.5"],
            "vllm-scaler: VLLM_SCALER_METRICS_PORT (--metrics-port): value '1.5': expected a whole"
            " number",
            id="port-whole-number",
        ),
        pytest.param(
            ["bench", "--jobs", "two"],
            "vllm-scaler: --jobs: value 'two': expected a whole number",
            id="jobs",
        ),
        pytest.param(
            ["run", "--intervall", "3"],
            "vllm-scaler: no such option: --intervall (Possible options: --in-cluster, "
            "--interval); see vllm-scaler run --help",
            id="no-such-option",
        ),
        pytest.param(
            ["check-policy"],
            "vllm-scaler: policy.yaml: cannot read policy file: No such file or directory; "
            "expected a readable file given as the POLICY_FILE argument or "
            "VLLM_SCALER_POLICY_FILE (default: policy.yaml)",
            id="no-argument-and-no-policy-yaml",
        ),
        pytest.param(
            ["backtest", "--target"],
            "vllm-scaler: option '--target' requires an argument; see vllm-scaler backtest --help",
            id="option-without-value",
        ),
        pytest.param(
            ["backtest", "--start", "yesterday"],
            f"vllm-scaler: --start: value 'yesterday': expected a time: {TIME_FORMS}",
            id="start",
        ),
        pytest.param(
            ["backtest", "--end", "now-1h30"],
            "vllm-scaler: --end: value 'now-1h30': expected now-<duration>, a number with a "
            "unit ms, s, m, h, d, w or y (now-6h, now-1h30m)",
            id="end-relative",
        ),
        pytest.param(
            ["backtest", "--step", "0.5s"],
            "vllm-scaler: --step: value '0.5s': expected a whole number of seconds >= 1, bare "
            "or with a unit s, m, h, d, w or y (15, 15s, 1m, 1h30m)",
            id="step",
        ),
        *(
            pytest.param(
                ["backtest", "--step", value],
                f"vllm-scaler: --step: value '{value}': expected a whole number of seconds >= 1, "
                "bare or with a unit s, m, h, d, w or y (15, 15s, 1m, 1h30m)",
                id=f"step-{value}",
            )
            for value in ("0", "0s", "500ms", "1.5", "fast")
        ),
        *(
            pytest.param(
                ["backtest", "--step", value],
                f"vllm-scaler: --step: value '{value}': expected a whole number of seconds >= 1, "
                "bare or with a unit s, m, h, d, w or y (15, 15s, 1m, 1h30m)",
                id=f"step-too-large-for-a-float-{form}",
            )
            for form, value in (("bare", "9" * 400), ("with-unit", "9" * 400 + "s"))
        ),
        *(
            pytest.param(
                ["backtest", option, value],
                f"vllm-scaler: {option}: value '{value}': expected a time from "
                "1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z",
                id=f"{option}-{value[:8]}-out-of-range",
            )
            for option, value in (
                ("--start", "99999999999999"),
                ("--end", "now+999999w"),
                ("--start", "now-" + "9" * 400 + "w"),
                ("--start", "now-5000w"),
            )
        ),
        pytest.param(
            ["bench", "--rate-scale", "nan"],
            "vllm-scaler: --rate-scale: value nan: expected a finite number > 0 and <= 1000",
            id="not-finite-option",
        ),
        pytest.param(
            ["recommend", "--interval", "nan"],
            "vllm-scaler: VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval): value nan: expected "
            "a finite number",
            id="not-finite-setting",
        ),
        pytest.param(
            ["sim", "--kube", "kind"],
            "vllm-scaler: --kube: value 'kind': expected stand-in or real",
            id="sim-kube",
        ),
        pytest.param(
            ["backtest", "--max-points", "0"],
            "vllm-scaler: --max-points: value 0: expected a number >= 1 and <= 11000",
            id="max-points",
        ),
        pytest.param(
            # Prometheus refuses a range query of more points per series (HTTP 400)
            ["backtest", "--max-points", "20000"],
            "vllm-scaler: --max-points: value 20000: expected a number >= 1 and <= 11000",
            id="max-points-beyond-prometheus-limit",
        ),
    ],
)
def test_option_errors_name_option_value_and_expectation(args: list[str], line: str) -> None:
    assert _error(args) == line


def test_a_bad_value_from_the_environment_names_the_variable_and_the_option() -> None:
    line = _error(["recommend"], env={"VLLM_SCALER_CONTROL_INTERVAL_SECONDS": "abc"})
    assert line == (
        "vllm-scaler: VLLM_SCALER_CONTROL_INTERVAL_SECONDS (--interval): value 'abc': "
        "expected a duration: seconds (90) or a number with a unit ms, s, m, h, d, w or y "
        "(90s, 5m, 1.5m, 1h30m)"
    )


def test_an_end_before_the_start_names_both_values() -> None:
    line = _error(["backtest", "--start", "1746100800", "--end", "1746097200"])
    assert line == (
        "vllm-scaler: --end: value '1746097200' (2025-05-01T11:00:00Z) is before --start "
        "'1746100800' (2025-05-01T12:00:00Z): expected a time after --start"
    )
    # within the same second: the times are printed with their fractions, as the report
    # prints them, so the two differ where the values do
    sub_second = _error(["backtest", "--start", "1746100800.7", "--end", "1746100800.2"])
    assert sub_second == (
        "vllm-scaler: --end: value '1746100800.2' (2025-05-01T12:00:00.200000Z) is before "
        "--start '1746100800.7' (2025-05-01T12:00:00.700000Z): expected a time after --start"
    )
    relative = _error(["backtest", "--start", "now", "--end", "now-1h"])
    assert re.fullmatch(
        r"vllm-scaler: --end: value 'now-1h' \(\S+Z\) is before --start 'now' \(\S+Z\): "
        r"expected a time after --start",
        relative,
    ), relative


def test_unreachable_previews_name_the_url_without_its_password(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://viewer:pw-Hq83k@127.0.0.1:{port}"
    result = CliRunner().invoke(
        app,
        ["dashboards", "--out", str(tmp_path / "d"), "--previews", str(tmp_path / "p")],
        env={"VLLM_SCALER_PROMETHEUS_URL": url},
    )
    assert result.exit_code == 1, result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith(
        f"vllm-scaler: previews: Prometheus at http://viewer:***@127.0.0.1:{port}/ cannot be "
        "reached: transport: ConnectError: "
    ), last
    assert "pw-Hq83k" not in result.output


def test_a_policy_error_of_backtest_names_the_option(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    doc = {"targets": [{**case_target_doc(), "min_replicas": 9, "max_replicas": 8}]}
    policy.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, ["backtest", "--policy", str(policy)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"vllm-scaler: --policy: invalid policy\n  {policy}: targets[0].max_replicas: value 8: "
        "expected a number >= min_replicas (9)\n"
    )


def test_a_policy_error_of_bench_is_one_error_per_line(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    doc = {"targets": [{**case_target_doc(), "min_replicas": 9, "max_replicas": 8, "replcia": 1}]}
    policy.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, ["bench", "--policy", str(policy)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "vllm-scaler: --policy: invalid policy"
    assert [line.split(": ")[1] for line in lines[1:]] == [
        "targets[0].max_replicas",
        "targets[0].replcia",
    ]


@pytest.mark.parametrize(
    ("command", "option", "under_file", "expected"),
    [
        pytest.param(["sim"], "--workdir", "", "expected a writable directory, but", id="sim"),
        pytest.param(
            ["sim"], "--workdir", "sub", "expected a writable directory, but", id="sim-under"
        ),
        pytest.param(
            ["bench", "--trace", "code"],
            "--plot",
            "x.png",
            "expected a writable file path, but",
            id="bench",
        ),
        pytest.param(
            ["backtest", "--policy", "p.yaml"],
            "--plot",
            "b.png",
            "expected a writable file path, but",
            id="backtest",
        ),
        pytest.param(
            ["dashboards"], "--out", "", "expected a writable directory, but", id="dashboards"
        ),
    ],
)
def test_an_output_path_under_a_file_stops_at_start(
    tmp_path: Path, command: list[str], option: str, under_file: str, expected: str
) -> None:
    a_file = tmp_path / "tok"
    a_file.write_text("x")
    value = a_file / under_file if under_file else a_file
    line = _error([*command, option, str(value)])
    assert line == f"vllm-scaler: {option}: value '{value}': {expected} {a_file} is a file"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    ("command", "option", "value", "expected"),
    [
        pytest.param(
            ["bench", "--trace", "code"],
            "--plot",
            "/proc/x.png",
            "expected a writable file path, but /proc is not writable",
            id="bench",
        ),
        pytest.param(
            ["backtest", "--policy", "p.yaml"],
            "--plot",
            "/proc/b.png",
            "expected a writable file path, but /proc is not writable",
            id="backtest",
        ),
        pytest.param(
            ["sim"],
            "--workdir",
            "/proc",
            "expected a writable directory, but /proc is not writable",
            id="sim",
        ),
    ],
)
def test_a_folder_that_takes_no_file_stops_at_start(
    command: list[str], option: str, value: str, expected: str
) -> None:
    # /proc passes os.access as root, yet no file can be created in it: a trial file tells
    line = _error([*command, option, value])
    assert line.startswith(f"vllm-scaler: {option}: value '{value}': {expected} ("), line


def test_a_previews_folder_that_is_a_file_stops_before_writing(tmp_path: Path) -> None:
    a_file = tmp_path / "p.png"
    a_file.write_text("x")
    out = tmp_path / "d"
    line = _error(["dashboards", "--out", str(out), "--previews", str(a_file)])
    assert line == (
        f"vllm-scaler: --previews: value '{a_file}': expected a writable directory, but "
        f"{a_file} is a file"
    )
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("command", ["bench", "backtest"])
def test_a_plot_path_that_is_a_directory_stops_at_start(tmp_path: Path, command: str) -> None:
    from scaler.config.options import plot_formats

    line = _error([command, "--plot", str(tmp_path)])
    formats = ", ".join(f".{f}" for f in plot_formats())
    assert line == (
        f"vllm-scaler: --plot: value '{tmp_path}': expected a file name ending in one of "
        f"{formats}, but it names a directory"
    )
    assert formats.startswith(".png, .svg, .pdf, ")


def test_the_plot_formats_are_those_matplotlib_writes() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from scaler.config.options import plot_formats

    assert sorted(plot_formats()) == sorted(FigureCanvasAgg.get_supported_filetypes())


def test_check_policy_warns_about_unknown_variables_as_every_command(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"targets": [case_target_doc(max_replicas=7)]}))
    result = CliRunner().invoke(
        app, ["check-policy", str(policy)], env={"VLLM_SCALER_POLICYFILE": str(policy)}
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "vllm-scaler: warning: unknown environment variable VLLM_SCALER_POLICYFILE is ignored "
        "(closest setting: VLLM_SCALER_POLICY_FILE)"
    ]
    assert result.stdout.startswith("llm/Deployment/vllm: replicas 1..7, ")


@pytest.mark.parametrize("command", [["run", "--dry-run"], ["recommend", "--once"]])
def test_a_missing_policy_is_the_only_line_of_run_and_recommend(
    tmp_path: Path, command: list[str]
) -> None:
    """Nothing (not recommend's line on the Prometheus it reads) comes before the error."""
    missing = tmp_path / "none.yaml"
    line = _error([*command, "--policy", str(missing), "--prometheus-url", "http://127.0.0.1:9"])
    assert line.startswith(f"vllm-scaler: {missing}: "), line


def test_a_bare_step_is_seconds(tmp_path: Path) -> None:
    # accepted: the next check (the policy file) is the one that fails
    line = _error(["backtest", "--step", "15", "--policy", str(tmp_path / "none.yaml")])
    assert line.startswith("vllm-scaler: --policy: "), line


def test_check_policy_reads_the_policy_file_variable(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(yaml.safe_dump({"targets": [case_target_doc(max_replicas=7)]}))
    result = CliRunner().invoke(app, ["check-policy"], env={"VLLM_SCALER_POLICY_FILE": str(policy)})
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("llm/Deployment/vllm: replicas 1..7, ")
    missing = _error(["check-policy"], env={"VLLM_SCALER_POLICY_FILE": str(tmp_path / "no.yaml")})
    assert missing.endswith("expected a readable file given as VLLM_SCALER_POLICY_FILE")


@pytest.mark.parametrize(
    ("command", "given_as"),
    [
        pytest.param(["check-policy"], "the POLICY_FILE argument", id="check-policy"),
        pytest.param(
            ["run", "--dry-run", "--policy"], "--policy FILE (VLLM_SCALER_POLICY_FILE)", id="run"
        ),
        pytest.param(
            ["recommend", "--once", "--policy"],
            "--policy FILE (VLLM_SCALER_POLICY_FILE)",
            id="recommend",
        ),
        pytest.param(["sim", "--policy"], "--policy FILE", id="sim"),
        pytest.param(["bench", "--policy"], "--policy FILE", id="bench"),
    ],
)
@pytest.mark.parametrize(
    "content", [b"# caf\xe9\ntargets: []\n", b"\x00\xff\xfe\x89PNG"], ids=["latin-1", "binary"]
)
def test_a_policy_file_that_is_not_utf8_is_one_line_naming_it(
    tmp_path: Path, command: list[str], given_as: str, content: bytes
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_bytes(content)
    result = CliRunner().invoke(app, [*command, str(policy)])
    assert result.exit_code == 2, result.output
    # the error is the only line (recommend says which Prometheus it reads after the policy)
    assert result.stderr.splitlines()[-1].endswith(
        f"{policy}: the file is not UTF-8 text; expected a YAML policy file given as {given_as}"
    ), result.stderr


def test_recommend_with_an_empty_policy_file_variable_says_it_is_empty() -> None:
    line = _error(["recommend", "--once"], env={"VLLM_SCALER_POLICY_FILE": ""})
    assert line == (
        "vllm-scaler: VLLM_SCALER_POLICY_FILE (--policy): value '': the value is empty; "
        "expected the path of a YAML policy file"
    )


@pytest.mark.parametrize(
    ("args", "given_as"),
    [
        pytest.param(["check-policy", ""], "the POLICY_FILE argument", id="check-policy"),
        pytest.param(
            ["recommend", "--once", "--policy", ""],
            "--policy FILE (VLLM_SCALER_POLICY_FILE)",
            id="recommend",
        ),
        pytest.param(["bench", "--policy", ""], "--policy FILE", id="bench"),
    ],
)
def test_an_empty_policy_option_says_it_is_empty(args: list[str], given_as: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1].endswith(
        "the path is empty (or '.', the current directory); expected the path of a YAML "
        f"policy file given as {given_as}"
    ), result.stderr


def _commands() -> list[tuple[str, Any]]:
    """Every command of the app by name, its click command loaded."""
    group: Any = typer.main.get_command(app)
    return [(name, group.get_command(None, name)) for name in group.list_commands(None)]


def _flag_cases() -> list[Any]:
    """``(command, --flag=value, the spelling the error must name)`` for every boolean flag
    of every command: each flag's true and false, on its name and on its pair's."""
    cases = []
    for name, command in _commands():
        for param in command.params:
            if not getattr(param, "is_flag", False):
                continue
            on = next(o for o in param.opts if o.startswith("--"))
            off = next((o for o in param.secondary_opts if o.startswith("--")), None)
            given = [(f"{on}=false", f"write {off}" if off else f"leave {on} out")]
            given.append((f"{on}=1", f"write {on}"))
            if off:
                given += [(f"{off}=true", f"write {off}"), (f"{off}=0", f"write {on}")]
            for arg, hint in given:
                cases.append(pytest.param(name, arg, hint, id=f"{name}-{arg}"))
    return cases


FLAG_CASES = _flag_cases()


def test_the_flag_cases_cover_the_pairs_and_the_lone_flags() -> None:
    ids = {p.id for p in FLAG_CASES}
    assert {"run---leader-election=false", "run---no-leader-election=true"} <= ids
    assert {"recommend---once=false", "run---dry-run=1", "sim---no-compare=false"} <= ids


@pytest.mark.parametrize(("command", "arg", "hint"), FLAG_CASES)
def test_a_flag_given_a_boolean_value_names_the_spelling_that_says_it(
    command: str, arg: str, hint: str
) -> None:
    assert _error([command, arg]) == (
        f"vllm-scaler: {arg}: a flag takes no value: {hint}; see vllm-scaler {command} --help"
    )


def test_a_flag_given_another_value_names_both_spellings() -> None:
    assert _error(["run", "--leader-election=maybe"]) == (
        "vllm-scaler: --leader-election=maybe: a flag takes no value: write --leader-election "
        "or --no-leader-election; see vllm-scaler run --help"
    )
    assert _error(["recommend", "--once=soon"]) == (
        "vllm-scaler: --once=soon: a flag takes no value: write --once or leave it out; see "
        "vllm-scaler recommend --help"
    )


def _setting_cases() -> list[Any]:
    """``(command, option, variable)`` of every setting of a number or a fixed choice that a
    command offers: a value ``x`` fails its conversion."""
    from scaler.config.settings import Settings, env_name

    convertible = {
        env_name(field)
        for field, info in Settings.model_fields.items()
        if info.annotation in (int, float) or get_origin(info.annotation) is Literal
    }
    cases = []
    for name, command in _commands():
        for param in command.params:
            if isinstance(param.envvar, str) and param.envvar in convertible:
                option = next(o for o in param.opts if o.startswith("--"))
                cases.append(pytest.param(name, option, param.envvar, id=f"{name}-{option}"))
    return cases


SETTING_CASES = _setting_cases()


def test_the_setting_cases_cover_every_command_that_takes_settings() -> None:
    ids = {p.id for p in SETTING_CASES}
    assert {"run---interval", "run---metrics-port", "run---lease-duration-seconds"} <= ids
    assert {"recommend---log-format", "backtest---prometheus-timeout-seconds"} <= ids
    assert "dashboards---prometheus-cloud-auth" in ids


@pytest.mark.parametrize(("command", "option", "variable"), SETTING_CASES)
def test_a_settings_bad_value_names_its_variable_and_option_from_either_source(
    command: str, option: str, variable: str
) -> None:
    """As the settings' own checks name a setting (``VLLM_SCALER_... (--option)``), given as
    the option or as the variable."""
    from_option = _error([command, option, "x"])
    from_variable = _error([command], env={variable: "x"})
    assert from_option.startswith(f"vllm-scaler: {variable} ({option}): value 'x': expected ")
    assert from_variable == from_option
