"""The `fetchtool` console entry point (also `python -m fetchtool`)."""

import sys


def main() -> None:
    # kio registers hypothesis strategies for its types whenever hypothesis is importable: ~90 ms of start-up and
    # a .hypothesis/ folder left in the user's working directory. The CLI never needs them, so hide hypothesis
    # from this process before kio is imported.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from fetchtool.cli import app

    app()


if __name__ == "__main__":
    main()
