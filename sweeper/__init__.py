"""kubeflow-deadline-sweeper: Kubeflow training jobs past their deadline give their GPUs back.

The command is ``sweeper`` (``sweeper.cli``); README.md describes it.
"""

__version__ = "0.1.0"
