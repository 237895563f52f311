"""``python -m specdec_check`` and the ``specdec-check`` console script."""

from ._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
