"""The kind table and lookups by name or plural."""

from __future__ import annotations

import pytest

from sweeper.core.families import KINDS, lookup
from sweeper.core.families.mpi_operator import MPIJOB
from sweeper.core.families.training_operator import JAXJOB, MXJOB, PYTORCHJOB

LOOKUPS = [
    ("PyTorchJob", PYTORCHJOB),
    ("pytorchjob", PYTORCHJOB),
    ("pytorchjobs", PYTORCHJOB),
    ("pytorchjobs.kubeflow.org", PYTORCHJOB),
    (" MPIJob ", MPIJOB),
    ("JAXJOBS", JAXJOB),
    ("mxjobs.kubeflow.org", MXJOB),
]


@pytest.mark.parametrize(("text", "kind"), LOOKUPS)
def test_lookup(text: str, kind: object) -> None:
    assert lookup(text) == kind


def test_a_kind_two_families_serve_is_one_row_with_both_versions() -> None:
    mpijob = lookup("MPIJob")
    assert mpijob.versions == ("v1", "v2beta1")
    assert mpijob.reading("v1") != mpijob.reading("v2beta1") == MPIJOB.reading("v2beta1")


def test_unknown_kinds_list_the_valid_ones() -> None:
    with pytest.raises(KeyError, match="expected one of TFJob, PyTorchJob, XGBoostJob"):
        lookup("JobSet")


def test_the_table_matches_operator_md() -> None:
    assert [(k.name, k.plural, k.replica_specs) for k in KINDS] == [
        ("TFJob", "tfjobs", "tfReplicaSpecs"),
        ("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs"),
        ("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs"),
        ("MPIJob", "mpijobs", "mpiReplicaSpecs"),
        ("PaddleJob", "paddlejobs", "paddleReplicaSpecs"),
        ("JAXJob", "jaxjobs", "jaxReplicaSpecs"),
        ("MXJob", "mxjobs", "mxReplicaSpecs"),
        ("TrainJob", "trainjobs", ""),
    ]
    assert {k.name: k.group for k in KINDS if k.group != "kubeflow.org"} == {
        "TrainJob": "trainer.kubeflow.org"
    }
    assert [k.name for k in KINDS if not k.checks_managed_by] == ["JAXJob", "MXJob"]
    assert [k.name for k in KINDS if k.legacy_clean_pod_policy] == ["MPIJob"]
