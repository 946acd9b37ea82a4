"""kubeflow-deadline-sweeper: enforces activeDeadlineSeconds on Kubeflow Training Operator v1 jobs."""

__version__ = "0.1.0"
