"""One small module per command (after pip's ``commands/`` package).

Each module parses its flags, builds a request, calls a service (:mod:`trainplan.services`) and
hands the result to :mod:`trainplan.report` to print. Command modules import only typer and
trainplan's light modules at import time (the shared options of :mod:`trainplan.cli.cmdoptions`);
everything heavy loads inside the command. :data:`trainplan.cli.COMMANDS` names them; a module
that fails to import fails the CLI loudly: nothing is dropped.
"""
