"""Long runs: purchase options under failures and spot pre-emption (``economics``), a Monte
Carlo check of the formulas (``simulate``), elastic schedules (``schedule``) and their CLI
commands. The physics is ``trainplan.costmodel.reliability``; the runtime side is
``trainplan.guard`` and the launch files ``trainplan.export.elastic``."""
