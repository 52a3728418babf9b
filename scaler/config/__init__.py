"""What to scale and how, and where things are: the lowest layer, importing no other package.

- :mod:`.vocabulary`: the words every layer shares (the signal names).
- :mod:`.policy`: the YAML scaling policy (targets, signals, tolerances, windows, step
  limits), validated with errors that name the field, the value and what was expected.
- :mod:`.settings`: process settings from the environment and the command line, among them
  the one Prometheus client configuration of every command.
- :mod:`.cli_options`: every setting as a command-line option, and ``--output text|json``.
- :mod:`.secrets`: which strings are secrets, in every form they may be printed in.
- :mod:`.options`: range checks of numeric command-line options.
"""
