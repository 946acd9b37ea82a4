"""The fast page decoder reads every job exactly as the reference does (issue 15).

The reference is ``json.loads`` followed by ``sweeper.core.jobs.parse_job`` for every item; the fast
path (``sweeper.k8s.decode.decode_jobs``) decodes only the fields the views need. Over valid jobs,
jobs with one broken field and arbitrary JSON, alone or mixed in one page, both give the same
views (malformed ones and the field they name included) and the same continue token.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.core.families import KIND_NAMES, KINDS
from sweeper.core.platform import PlatformView, load_platform
from sweeper.k8s import decode
from tests.property.strategies import job_cases, json_values, malformed_jobs

NOW = datetime(2031, 5, 17, 12, 0, 0, tzinfo=UTC)

anything_a_page_may_hold = st.one_of(
    job_cases(NOW).map(lambda case: case.raw()),
    malformed_jobs(NOW).map(lambda broken: broken.raw),
    json_values,
)
tokens = st.one_of(st.none(), st.just(""), st.text(max_size=8), st.integers())


def page(items: list[Any], token: Any) -> bytes:
    meta = {"resourceVersion": "7"} if token is None else {"continue": token}
    return json.dumps({"kind": "JobList", "items": items, "metadata": meta}).encode()


# Half the profile's examples: each one is a page of jobs through both decoders, and
# generating the jobs is most of the time (each test stays within the unit budget, 3 s).
PAGES = settings(max_examples=max(10, settings().max_examples // 2))


@PAGES
@given(
    items=st.lists(anything_a_page_may_hold, max_size=4),
    token=tokens,
    kind=st.sampled_from(KINDS),
    version=st.sampled_from(["v1", "v2beta1"]),
)
def test_the_fast_decoder_reads_a_page_as_the_reference_does(
    items: list[Any], token: Any, kind: Any, version: str
) -> None:
    data = page(items, token)
    assert read(decode.decode_jobs, data, kind, version) == read(
        decode.reference_decode_jobs, data, kind, version
    )


def read(decoder: Any, data: bytes, *args: Any) -> Any:
    """The page, or why it is not one (a token that is not a string: not a List)."""
    try:
        return decoder(data, *args)
    except decode.NotAList as error:
        return f"not a List: {error}"


@PAGES
@given(st.lists(job_cases(NOW).map(lambda case: case.raw()), min_size=1, max_size=4))
def test_valid_jobs_never_need_the_reference(items: list[dict[str, Any]]) -> None:
    data = page(items, "next")
    expected = decode.reference_decode_jobs(data, KINDS[0], "v1")
    with mock.patch.object(decode, "reference_decode_jobs", side_effect=AssertionError):
        fast = decode.decode_jobs(data, KINDS[0], "v1")
    assert fast == expected
    # Whatever a valid job holds (touched-at garbled or not), no view of it is malformed.
    assert all(job.malformed is None for job in fast.jobs)


rules = st.builds(
    lambda default, over, exempt: (
        "rules:\n- name: all\n  namespaceSelector: {}\n"
        + (f"  defaultDeadline: {default}s\n" if default else "")
        + (f"  maxDeadline: {(default or 0) + over}s\n" if over else "")
        + f"  allowExemption: {'true' if exempt else 'false'}\n"
    ),
    st.none() | st.integers(1, 10**6),
    st.none() | st.integers(1, 10**6),
    st.booleans(),
)


@PAGES
@given(
    items=st.lists(anything_a_page_may_hold, max_size=4),
    text=rules,
    kind=st.sampled_from(KINDS),
    version=st.sampled_from(["v1", "v2beta1"]),
)
def test_a_job_is_decoded_under_its_rule_as_if_viewed_after(
    items: list[Any], text: str, kind: Any, version: str
) -> None:
    # Built once under the rule (the listing's way) == built, then put under it (apply).
    data = page(items, None)
    namespaces = {
        item["metadata"].get("namespace")
        for item in items
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict)
    }
    labels: dict[str, dict[str, str]] = {ns: {} for ns in namespaces if isinstance(ns, str)}
    view = PlatformView(load_platform(text, "rules.yaml", KIND_NAMES), labels)
    for decoder in (decode.decode_jobs, decode.reference_decode_jobs):
        plain, under = (
            read(decoder, data, kind, version),
            read(decoder, data, kind, version, view),
        )
        if isinstance(plain, str):
            assert under == plain
        else:
            assert under.jobs == [view(job) for job in plain.jobs]
