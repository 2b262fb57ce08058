"""Running a target: trials and seeds, executors, checkpoints, progress, shipping user code
to workers, and the :class:`~dpverify.execution.experiment.Experiment` every check receives.
"""
