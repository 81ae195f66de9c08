"""The `fetchtool` console entry point (also `python -m fetchtool`)."""

import sys


def main() -> None:
    # kio registers hypothesis strategies for its types whenever hypothesis is importable: ~90 ms of start-up and
    # a .hypothesis/ folder left in the user's working directory. The CLI never needs them, so hide hypothesis
    # from this process before kio is imported.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        from fetchtool.cli import app  # a second of imports: Ctrl-C here must not print a traceback either
    except KeyboardInterrupt:
        sys.exit(130)  # as click does for Ctrl-C once the app runs
    # Usage errors are worded as one line by the app's own group (fetchtool.cli), so CliRunner sees them too.
    app(prog_name="fetchtool")  # `python -m fetchtool` is still fetchtool in usage lines and help


if __name__ == "__main__":
    main()
