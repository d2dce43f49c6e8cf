"""The `liminis-context-graph` command line: the reference's flags and exit statuses (docs/api.md §cli)."""

from __future__ import annotations

import sys

import pytest

import lcg
from lcg.cli import main as lcg_main
from lcg.cli.compat import PROG, USAGE, main, parse_args


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    code = exited.value.code
    assert isinstance(code, int)
    return code, out, err


def test_help_wins_over_everything_and_prints_usage_to_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(capsys, "--connect", "--bogus", "-h") == (0, USAGE, "")
    assert run(capsys, "--help") == (0, USAGE, "")


def test_version_prints_the_program_name_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "-V") == (0, f"{PROG} {lcg.__version__}\n", "")
    assert run(capsys, "--mcp-stdio", "--version") == (0, f"{PROG} {lcg.__version__}\n", "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "unknown argument '--bogus'"),
        (["--mcp-stdio", "--connect"], "--connect requires a value"),
        (["--mcp-stdio", "--scope"], "--scope requires a value"),
        (["--connect", "/tmp/x.sock"], "--connect requires --mcp-stdio"),
        (["--scope", "read"], "--scope requires --mcp-stdio"),
        (
            ["--mcp-stdio", "--scope", "read,nope"],
            "unknown scope 'nope'; valid values: read, write, cypher, admin, all",
        ),
        (["--mcp-stdio", "--scope= , ,"], "--scope needs at least one value"),
        (
            ["--embedder-uds", "/a", "--embedder-http", "http://h"],
            "--embedder-uds and --embedder-http are mutually exclusive",
        ),
        (
            ["--extractor-uds", "/a", "--extractor-http", "http://h"],
            "--extractor-uds and --extractor-http are mutually exclusive",
        ),
        (
            ["--embedder-http", "ftp://h"],
            "--embedder-http must be an http:// or https:// URL with a host",
        ),
        (
            ["--extractor-http", "http://"],
            "--extractor-http must be an http:// or https:// URL with a host",
        ),
    ],
)
def test_usage_errors_exit_2_with_the_program_name(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith(f"{PROG}: {message}")


def test_unknown_argument_errors_include_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err = run(capsys, "--nope")
    assert USAGE in err


def test_the_scope_list_is_trimmed_deduplicated_and_takes_both_forms() -> None:
    assert parse_args(["--mcp-stdio", "--scope=read, write,,read"]).scope == "read, write,,read"
    opts = parse_args(
        ["--mcp-stdio", "--scope", "all", "--connect", "/s.sock", "--allow-remote-close"]
    )
    assert (opts.mcp_stdio, opts.scope, opts.connect, opts.allow_remote_close) == (
        True,
        "all",
        "/s.sock",
        True,
    )
    assert (
        parse_args(["--embedder-uds", "/e.sock", "--extractor-http", "https://x"]).extractor_http
        == "https://x"
    )


def test_attached_mode_fails_with_status_1_naming_the_socket(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--mcp-stdio", "--connect", "/nonexistent/lcg.sock")
    assert code == 1
    assert out == ""
    assert err.startswith(
        f"{PROG}: failed to connect to attached service at '/nonexistent/lcg.sock'"
    )


def test_a_missing_embedder_socket_is_a_startup_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--mcp-stdio", "--embedder-uds", "/nonexistent/embed.sock")
    assert code == 1
    assert err.startswith(
        f"{PROG}: --embedder-uds: socket '/nonexistent/embed.sock' does not exist"
    )


def test_lcg_mcp_rejects_a_bad_scope_with_a_config_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["lcg", "mcp", "--scope", "reed"])
    with pytest.raises(SystemExit) as exited:
        lcg_main.main()
    assert exited.value.code == 2  # ConfigError.exit_code
    assert "unknown scope 'reed'" in capsys.readouterr().err
