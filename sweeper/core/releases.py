"""Training Operator v1 releases, as ``--operator-version`` names them, and what differs by one.

One difference a user sees (docs/operator.md, "Per release"): v1.7.0 to v1.9.3 delete every pod
of a job failed by its deadline whatever ``cleanPodPolicy`` says, v1.9.4 follows it
(kubeflow/trainer#3419, #3420); ``--terminate-pods policy`` keeps what that release keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"v?(\d{1,4})\.(\d{1,4})\.(\d{1,4})")


@dataclass(frozen=True, slots=True, order=True)
class Release:
    """One Training Operator v1 release, ordered by its version."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        """The tag, for example ``v1.9.4``."""
        return f"v{self.major}.{self.minor}.{self.patch}"

    @property
    def deletes_every_pod_on_deadline(self) -> bool:
        """Whether a deadline failure deletes every pod whatever ``cleanPodPolicy`` says."""
        return self < CLEAN_POD_POLICY_ON_DEADLINE


# Every tag whose semantics the sweeper reproduces: from the first release with <Kind>Failed
# reasons and runPolicy.suspend (v1.7.0) to the last v1 release (there is no v1.9.5). Anything
# else, v1.8.7 included, is most likely a typo, and a wrong release could delete pods.
KNOWN = tuple(
    Release(1, minor, patch)
    for minor, patch in ((7, 0), (8, 0), (8, 1), (9, 0), (9, 1), (9, 2), (9, 3), (9, 4))
)
# The first release whose deadline failure follows cleanPodPolicy (kubeflow/trainer#3420).
CLEAN_POD_POLICY_ON_DEADLINE = Release(1, 9, 4)


def parse_release(text: str) -> Release:
    """Read ``--operator-version``: ``vX.Y.Z`` (``v`` optional) from v1.7.0 to v1.9.4."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a release (expected vX.Y.Z, for example v1.9.4)")
    release = Release(*(int(part) for part in match.groups()))
    if release not in KNOWN:
        known = ", ".join(str(r) for r in KNOWN)
        raise ValueError(
            f"{release} is not a Training Operator v1 release the sweeper knows ({known}); "
            "for a fork give the release it is based on, or leave it unset"
        )
    return release
