"""The `fetchtool` console entry point (also `python -m fetchtool` and `python -m fetchtool.cli`)."""

import atexit
import gc
import os
import signal
import sys

from fetchtool import hide_hypothesis


def main() -> None:
    # Start-up allocates only what lives as long as the process (modules, classes, the command line): the cyclic
    # collector, which would re-walk it all every few hundred allocations, waits until the command runs
    # (fetchtool.cli re-enables it then). A help screen ends without it.
    gc.disable()
    hide_hypothesis()
    # Registered first, so run last: after the command and the other exit handlers (thread joins, PySpark's JVM
    # kill), which a Ctrl-C still interrupts.
    atexit.register(_ctrl_c_over)
    try:
        from fetchtool.cli import app, help_drawn  # Ctrl-C during the imports must not print a traceback either
    except KeyboardInterrupt:
        sys.exit(130)  # as click does for Ctrl-C once the app runs
    try:
        # Usage errors are worded as one line by the app's own group (fetchtool.cli), so CliRunner sees them too.
        app(prog_name="fetchtool")  # `python -m fetchtool` is still fetchtool in usage lines and help
    except SystemExit as exc:
        if help_drawn() and isinstance(exc.code, int):
            _end_after_help(exc.code)
        raise


def _ctrl_c_over() -> None:
    """The command is over and its output out: a Ctrl-C during the interpreter's teardown is ignored, and the
    command's own exit status stands. Python resets a handled SIGINT to the default action for its teardown, so a
    Ctrl-C in that last tenth of a second (a Spark driver's) killed the finished command (exit -2)."""
    if signal.getsignal(signal.SIGINT) is not None:  # (None: a handler Python did not install; left as it is)
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _end_after_help(code: int) -> None:
    """A help screen leaves nothing to clean up: once its text is out, end the process without the interpreter's
    teardown of the 200-odd modules it imported (a tenth of the screen's time). Returns if the text cannot be
    written out, for the usual exit to report it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        return
    os._exit(code)


if __name__ == "__main__":
    main()
