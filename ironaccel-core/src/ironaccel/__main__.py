"""`python -m ironaccel`: the survey (see `ironaccel.cli`)."""

from .cli import main

raise SystemExit(main())
