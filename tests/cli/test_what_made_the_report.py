"""A ticket says what made the report attached to it: --version / -V, and the versions in every JSON and
markdown report; -h is help everywhere, and help shows readable value names, not Python types."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

from fetchtool import CONTRACT_VERSION

from cli_runs import CHURN, COMMANDS, READERS, REBALANCE, fetchtool

METADATA = version("fetchtool")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_the_installed_package_and_the_contract(flag):
    proc = fetchtool(flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"fetchtool {METADATA} (report contract {CONTRACT_VERSION})"


@pytest.mark.parametrize("command", COMMANDS)
def test_h_is_help_for_every_command(command):
    short, long = fetchtool(command, "-h", env={"COLUMNS": "200"}), fetchtool(command, "--help", env={"COLUMNS": "200"})
    assert short.returncode == 0 and "Usage:" in short.stdout
    assert short.stdout == long.stdout


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_names_values_not_python_types(command):
    text = fetchtool(*([command] if command else []), "-h", env={"COLUMNS": "200"}).stdout
    assert not re.search(r"<(bool|str|int|float|path|list\[[^]]*\])>", text), text
    if command in READERS:
        assert re.search(r"CAPTURES?\.\.\.", text) and "--since" in text and "--width" in text


def test_a_flag_given_a_value_is_refused_not_read_as_a_capture():
    proc = fetchtool("replay", "--dry-run", "true", REBALANCE)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: --dry-run is a flag and takes no value") and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["analyze"], ["sessions"], ["savings"], ["simulate"], ["replay", "--dry-run"],
                                  ["replay", "--as-fast-as-possible"]])
def test_every_json_report_names_fetchtool_and_contract_versions(args):
    proc = fetchtool(*args, REBALANCE, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["fetchtool_version"] == METADATA and doc["contract_version"] == CONTRACT_VERSION


@pytest.mark.parametrize("args", [["analyze"], ["sessions"], ["savings"], ["simulate"], ["replay", "--dry-run"],
                                  ["replay", "--as-fast-as-possible"]])
def test_every_markdown_report_names_fetchtool_and_contract_versions(args):
    proc = fetchtool(*args, CHURN, "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    assert f"fetchtool {METADATA} (report contract {CONTRACT_VERSION})" in proc.stdout.splitlines()[-1]
    assert proc.stdout.startswith("#")
