"""The names artifactcheck writes into a cluster, in one place.

Annotation keys, the readiness-gate condition type, the ArtifactCheck CRD's group,
version and plural, the leader Lease and the labels of release ConfigMaps are an
interface: k8s/*.yaml, kubectl users, dashboards and a restarted controller (which
recovers its state from them) all read them. A name spelt twice can drift apart, so
every module that needs one imports it from here. Plain strings, no imports: the
lowest layer, usable by the pure core (:mod:`artifactcheck.judge.decide`) and the
Kubernetes adapters alike.
"""

from __future__ import annotations

#: The API group of everything artifactcheck defines: CRD, annotations, labels.
GROUP = "artifactcheck.io"
#: Prefix of every annotation and label artifactcheck writes or reads.
ANNOTATION_PREFIX = f"{GROUP}/"

# --- the ArtifactCheck custom resource
CRD_GROUP = GROUP
CRD_VERSION = "v1alpha1"
CRD_PLURAL = "artifactchecks"
CRD_KIND = "ArtifactCheck"
CRD_API_VERSION = f"{CRD_GROUP}/{CRD_VERSION}"
#: The ReleaseAcceptance custom resource: a changed release accepted for one check.
ACCEPTANCE_KIND = "ReleaseAcceptance"
ACCEPTANCE_PLURAL = "releaseacceptances"

# --- pods: the readiness gate and the marks artifactcheck leaves on them
#: Readiness-gate condition type a pod spec lists to let artifactcheck hold it back.
DEFAULT_CONDITION_TYPE = f"{GROUP}/content-verified"
ANN_QUARANTINED = f"{GROUP}/quarantined"
ANN_VERDICT = f"{GROUP}/verdict"
ANN_REASON = f"{GROUP}/reason"
ANN_STREAK = f"{GROUP}/streak"
ANN_CHECKED_AT = f"{GROUP}/checked-at"
ANN_FLAGGED_AT = f"{GROUP}/flagged-at"
#: The annotations a flag sets and an unflag removes.
FLAG_ANNOTATIONS = (ANN_VERDICT, ANN_REASON, ANN_STREAK, ANN_FLAGGED_AT)

# --- nodes
ANN_CORDONED = f"{GROUP}/cordoned"
ANN_CORDON_REASON = f"{GROUP}/cordon-reason"

# --- leader election and Events
LEASE_NAME = "artifactcheck-leader"
#: ``source.component`` / ``reportingComponent`` of the Events artifactcheck records.
COMPONENT = "artifactcheck"

# --- release manifests kept in ConfigMaps
RELEASE_VERSION_LABEL = f"{GROUP}/version"
RELEASE_CONFIGMAP_SELECTOR = f"{GROUP}/release-manifests=true"

__all__ = [
    "ACCEPTANCE_KIND",
    "ACCEPTANCE_PLURAL",
    "ANNOTATION_PREFIX",
    "ANN_CHECKED_AT",
    "ANN_CORDONED",
    "ANN_CORDON_REASON",
    "ANN_FLAGGED_AT",
    "ANN_QUARANTINED",
    "ANN_REASON",
    "ANN_STREAK",
    "ANN_VERDICT",
    "COMPONENT",
    "CRD_API_VERSION",
    "CRD_GROUP",
    "CRD_KIND",
    "CRD_PLURAL",
    "CRD_VERSION",
    "DEFAULT_CONDITION_TYPE",
    "FLAG_ANNOTATIONS",
    "GROUP",
    "LEASE_NAME",
    "RELEASE_CONFIGMAP_SELECTOR",
    "RELEASE_VERSION_LABEL",
]
