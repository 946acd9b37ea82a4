"""kubeflow-deadline-sweeper: enforces activeDeadlineSeconds on Kubeflow Training Operator v1 jobs.

The command is ``sweeper`` (``sweeper.cli``); README.md describes it.
"""

__version__ = "0.1.0"
