"""What a command imports, as the shell starts it: `fetchtool --help` and `fetchtool COMMAND --help` draw their
screen with typer and rich, from the command modules' option declarations, and import none of what the commands
run; a command that runs imports what it uses and not the other commands' machinery.

Each scenario runs fetchtool as its console script does (fetchtool.__main__.main, in a fresh interpreter) and
reads back the modules it had imported when it exited. No timing here: benchmarks/bench_startup.py times it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from cli_runs import COMMANDS, REBALANCE, REPO

# As the console script: fetchtool.__main__.main with the command line; at exit, the modules imported (a help
# screen ends the process with os._exit, past atexit: the list is written then too).
PROBE = r"""
import atexit, json, os, sys
def write_modules():
    with open(os.environ["FETCHTOOL_TEST_MODULES"], "w") as f:
        json.dump(sorted(name for name, module in sys.modules.items() if module is not None), f)
atexit.register(write_modules)
end = os._exit
def write_and_end(code):
    write_modules()
    end(code)
os._exit = write_and_end
sys.argv[0] = "fetchtool"
from fetchtool.__main__ import main
main()
"""

# What no help screen needs: the capture reader, the protocol (kio, and the hypothesis strategies kio registers
# when hypothesis can be imported), the session engine, analysis, replay, the broker, the data frames, asyncio,
# and the parts of typer and rich a help screen never uses (typer's pydantic coercion of values, rich's markdown
# and syntax highlighting).
NOT_FOR_HELP = ["fetchtool.capture", "fetchtool.decoder", "fetchtool.exchange", "fetchtool.protocol",
                "fetchtool.sessions", "fetchtool.analysis", "fetchtool.replay", "fetchtool.broker", "fetchtool.synth",
                "fetchtool.pipeline.spark", "fetchtool.pipeline.tables", "fetchtool.commands.reading",
                "fetchtool.commands.output", "kio", "hypothesis", "polars", "pyarrow", "pyspark", "scapy", "numpy",
                "asyncio", "pydantic", "markdown_it", "pygments", "rich.markdown", "rich.traceback"]


def imported(args: list[str], tmp_path, until_ready: bool = False) -> set[str]:
    """The modules `fetchtool ARGS` had imported when it exited (until_ready: a server, stopped with SIGTERM
    once it says it is listening)."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "FETCHTOOL_TEST_MODULES": str(out), "COLUMNS": "80"}
    cmd = [sys.executable, "-c", PROBE, *args]
    if until_ready:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=tmp_path) as proc:
            watchdog = threading.Timer(60, proc.kill)  # a broker that never says it listens fails, not hangs
            watchdog.start()
            try:
                assert proc.stdout is not None and proc.stdout.readline().startswith("listening on")
            finally:
                watchdog.cancel()
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
    return set(json.loads(out.read_text()))


def found(modules: set[str], packages: list[str]) -> list[str]:
    """The packages (or any module inside them) among the modules."""
    return sorted({p for p in packages for m in modules if m == p or m.startswith(p + ".")})


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_a_help_screen_imports_none_of_what_the_commands_run(command, tmp_path):
    args = [command, "--help"] if command else ["--help"]
    modules = imported(args, tmp_path)
    assert "rich.console" in modules  # the probe saw the help being drawn
    assert found(modules, NOT_FOR_HELP) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_help_builds_that_command_alone(command, tmp_path):
    modules = imported([command, "--help"], tmp_path)
    others = [f"fetchtool.commands.{c}" for c in COMMANDS if c != command]
    allowed = ["fetchtool.commands.analyze"] if command == "sessions" else []  # whose --sessions option it shares
    assert f"fetchtool.commands.{command}" in modules
    assert found(modules, others) == allowed


def test_decoding_to_jsonl_imports_no_analysis_replay_broker_or_data_frames(tmp_path):
    modules = imported(["decode", str(REBALANCE), "--format", "jsonl"], tmp_path)
    assert "fetchtool.decoder" in modules
    assert found(modules, ["fetchtool.analysis", "fetchtool.sessions", "fetchtool.replay", "fetchtool.broker",
                           "fetchtool.synth", "polars", "pyarrow", "pyspark", "hypothesis"]) == []


def test_decoding_fetches_into_a_pipe_needs_no_value_coercion_library_event_loop_or_progress_bar(tmp_path):
    """A scenario capture holds only Fetch v12+ bodies, which the direct reader takes: kio's serial layer (and the
    asyncio under it) stays unimported, as do pydantic (typer 0.29 coerced every option value through it) and
    rich's progress bar (stderr is not a terminal)."""
    modules = imported(["decode", str(REPO / "captures" / "scenarios" / "eviction-thrash.pcap"), "--format", "jsonl"],
                       tmp_path)
    assert "fetchtool.decoder" in modules
    assert found(modules, ["pydantic", "kio.serial", "asyncio", "rich.progress"]) == []


def test_analyze_imports_no_replay_broker_or_spark(tmp_path):
    modules = imported(["analyze", str(REBALANCE), "--format", "json"], tmp_path)
    assert "fetchtool.analysis.run" in modules
    assert found(modules, ["fetchtool.replay", "fetchtool.broker", "fetchtool.synth", "fetchtool.pipeline.spark",
                           "pyspark", "hypothesis"]) == []


def test_a_replay_plan_starts_no_broker_and_no_event_loop(tmp_path):
    modules = imported(["replay", "--dry-run", str(REBALANCE)], tmp_path)
    assert "fetchtool.replay.plan" in modules
    assert found(modules, ["fetchtool.replay.driver", "fetchtool.broker", "hypothesis"]) == []


def test_the_broker_imports_no_analysis_or_data_frames(tmp_path):
    modules = imported(["broker", "--port", "0"], tmp_path, until_ready=True)
    assert "fetchtool.broker.server" in modules
    assert found(modules, ["fetchtool.analysis", "fetchtool.replay", "fetchtool.decoder", "polars", "pyarrow",
                           "pyspark", "hypothesis"]) == []


def test_a_refused_broker_option_is_refused_before_the_broker_is_imported(tmp_path):
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", PROBE, "broker", "--cache-shards", "0"], capture_output=True,
                          text=True, env={**os.environ, "FETCHTOOL_TEST_MODULES": str(out)}, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --cache-shards")
    assert found(set(json.loads(out.read_text())), ["fetchtool.broker", "asyncio", "kio"]) == []


def test_python_m_fetchtool_cli_hides_hypothesis_from_kio_as_the_console_script_does(tmp_path):
    """`python -m fetchtool.cli` (how benchmarks and tests start a broker) is the console script too. synth
    writes its capture's record batches with kio, so kio is imported."""
    out = tmp_path / "modules.json"
    code = ("import atexit, json, os, runpy, sys\n"
            "atexit.register(lambda: open(os.environ['FETCHTOOL_TEST_MODULES'], 'w').write(json.dumps(sorted("
            "n for n, m in sys.modules.items() if m is not None))))\n"
            f"sys.argv = ['fetchtool', 'synth', 'healthy', '-o', {str(tmp_path / 'healthy.pcap')!r}]\n"
            "runpy.run_module('fetchtool.cli', run_name='__main__', alter_sys=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FETCHTOOL_TEST_MODULES": str(out)})
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(out.read_text()))
    assert "kio" in modules and found(modules, ["hypothesis"]) == []


def test_the_defaults_a_help_screen_shows_are_the_engines_and_the_reports():
    from fetchtool.analysis.shown import DEFAULT_SESSIONS
    from fetchtool.commands import defaults
    from fetchtool.sessions.cache import DEFAULT_EVICTION_MS, DEFAULT_MAX_SLOTS, DEFAULT_SHARDS

    assert (defaults.CACHE_SLOTS, defaults.CACHE_SHARDS, defaults.EVICTION_MS, defaults.SESSIONS_LISTED) == (
        DEFAULT_MAX_SLOTS, DEFAULT_SHARDS, DEFAULT_EVICTION_MS, DEFAULT_SESSIONS)


def test_rich_markdown_is_the_real_module_after_a_help_screen():
    """The help renderer is imported with stand-ins for rich.markdown and rich.traceback (fetchtool.commands.
    helptext): afterwards an import of either gets the real module, and typer's references work."""
    code = ("from fetchtool.commands.helptext import import_help_renderer\n"
            "import_help_renderer()\n"
            "import rich.markdown, rich.traceback, typer.rich_utils\n"
            "assert type(typer.rich_utils.Markdown('**x**')) is rich.markdown.Markdown\n"
            "assert typer.rich_utils.Traceback.from_exception == rich.traceback.Traceback.from_exception\n"
            "assert rich.markdown.Markdown.__module__ == 'rich.markdown'\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout == "ok\n", proc.stderr


def test_each_help_screen_is_the_one_typer_draws_for_commands_registered_up_front():
    """The commands are built on demand (fetchtool.cli); registered up front with app.command(), as fetchtool
    did before, typer draws the same screens."""
    import importlib

    import typer
    from typer.testing import CliRunner

    from fetchtool import cli
    from fetchtool.commands.helptext import reflowed

    up_front = typer.Typer(cls=cli._OneLineUsageErrors, name="fetchtool", help=cli.app.info.help,
                           no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                           context_settings={"help_option_names": ["-h", "--help"]})
    for name in COMMANDS:
        module = importlib.import_module(f"fetchtool.commands.{name}")
        doc = module.__doc__ or ""
        up_front.command(name, cls=cli._Command, help=reflowed(doc),
                         short_help=" ".join(doc.split("\n\n")[0].split()))(module.main)
    up_front.callback()(cli._root)
    runner = CliRunner()
    for args in (["--help"], *([c, "--help"] for c in COMMANDS)):
        lazy, eager = (runner.invoke(app, args, prog_name="fetchtool", env={"COLUMNS": "100"})
                       for app in (cli.app, up_front))
        assert lazy.exit_code == eager.exit_code == 0
        assert lazy.output == eager.output
        assert f"Usage: fetchtool {' '.join(args[:-1])}".rstrip() in lazy.output
