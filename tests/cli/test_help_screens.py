"""Help screens read in an 80-column terminal: prose wrapped at the terminal's width, and no option's help cut
short, whatever the width of the Kafka setting it names."""

from __future__ import annotations

import pytest

from cli_runs import COMMANDS, fetchtool


def _help(*args: str) -> str:
    proc = fetchtool(*args, "--help", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_no_help_line_is_cut_short_or_wider_than_the_terminal(command):
    text = _help(command)
    assert "…" not in text
    assert max(map(len, text.splitlines())) <= 80


def test_a_kafka_setting_named_in_an_option_help_is_shown_whole():
    # `broker`'s option names and metavars leave its help column 36 characters: the setting is 41
    text = _help("broker")
    assert "max.incremental.fetch.session.cache.slots" in "".join(text.replace("│", "").split())
    assert "socket.request.max.bytes" in text and "connections.max.idle.ms" in text


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_command_description_wraps_at_the_terminal_width_not_at_its_source_lines(command):
    prose = _help(command).split("Usage:")[1].split("╭")[0].splitlines()[1:]
    paragraphs = "\n".join(line.rstrip() for line in prose).split("\n\n")
    for lines in (p.strip("\n").splitlines() for p in paragraphs if p.strip()):
        # every line but a paragraph's last is filled close to the 80 columns
        assert all(len(line) > 60 for line in lines[:-1]), lines


def test_list_items_and_indented_examples_keep_their_own_lines():
    from fetchtool.commands.helptext import reflowed

    doc = """First line
    goes on here.

    Two ways:
    - one way,
      said at length;
    - another.
    1. a step

        fetchtool analyze x.pcap
        fetchtool sessions x.pcap
    """
    assert reflowed(doc) == ("First line goes on here.\n\nTwo ways:\n- one way, said at length;\n- another.\n"
                             "1. a step\n\n    fetchtool analyze x.pcap\n    fetchtool sessions x.pcap")
