"""Typed reads of the fields the apiserver always fills in on the pods and services it returns.

The client's models declare nearly every field optional (``V1Pod.status: V1PodStatus | None``)
because the same classes serve as request bodies, where anything may be left out. An object
read back from the apiserver always has ``metadata.name``; a pod always has ``spec`` (validation
requires it) and ``status`` (the apiserver sets ``phase: Pending`` when it creates one). These
functions narrow those fields for the type checker and, should that ever not hold, fail with
an error naming what was missing instead of an ``AttributeError`` on ``None``.
"""

from __future__ import annotations

from kubernetes import client


class MissingFieldError(ValueError):
    """An object from the apiserver lacks a field the apiserver always sets."""


def metadata(obj: client.V1Pod | client.V1Service) -> client.V1ObjectMeta:
    """The object's ``metadata``."""
    if obj.metadata is None:
        raise MissingFieldError(f"a {type(obj).__name__} from the apiserver has no metadata")
    return obj.metadata


def name(obj: client.V1Pod | client.V1Service) -> str:
    """The object's ``metadata.name``."""
    value = metadata(obj).name
    if value is None:
        raise MissingFieldError(f"a {type(obj).__name__} from the apiserver has no metadata.name")
    return value


def spec(pod: client.V1Pod) -> client.V1PodSpec:
    """The pod's ``spec``."""
    if pod.spec is None:
        raise MissingFieldError(f"pod {name(pod)} from the apiserver has no spec")
    return pod.spec


def status(pod: client.V1Pod) -> client.V1PodStatus:
    """The pod's ``status``."""
    if pod.status is None:
        raise MissingFieldError(f"pod {name(pod)} from the apiserver has no status")
    return pod.status
