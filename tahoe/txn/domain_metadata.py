"""Domain metadata (spec "Domain Metadata", the `domainMetadata` writer feature), the writer's
part.

  1. Users set and remove their own domains; names starting with `delta.` are reserved for the
     protocol's features (`check_user_domain`).
  2. tahoe's own operations set the system domains they maintain, today `delta.clustering`
     (`SYSTEM_DOMAINS`, `check_system_domain`); `delta.rowTracking` is written by the row
     tracking rule alone.
  3. A feature domain is tombstoned only once its feature is gone (`check_feature_domain_removable`).
  4. A commit that sets any domain needs the `domainMetadata` feature (`check_supported`).
The latest action per domain wins on replay; a concurrent commit that sets the same domain is a
conflict (`tahoe.txn.conflicts`).
"""

from __future__ import annotations

from ..errors import InvalidTableOperationError
from ..protocol.actions import Protocol
from ..protocol.clustering import CLUSTERING_DOMAIN
from ..protocol.table_features import is_feature_supported
from .attempt import Attempt
from .row_tracking import ROW_TRACKING_DOMAIN

__all__ = ["check_user_domain", "check_system_domain", "check_feature_domain_removable", "check_supported",
           "SYSTEM_DOMAINS", "FEATURE_DOMAINS"]

# delta.* domains tahoe's own operations may set (`Transaction.set_system_domain_metadata`)
SYSTEM_DOMAINS = frozenset({CLUSTERING_DOMAIN})
# each delta.* domain and the feature it belongs to
FEATURE_DOMAINS = {ROW_TRACKING_DOMAIN: "rowTracking", CLUSTERING_DOMAIN: "clustering"}


def check_user_domain(domain: str) -> None:
    """Rule 1."""
    if domain.lower().startswith("delta."):
        raise InvalidTableOperationError(
            f"metadata domain '{domain}' is reserved: domains named 'delta.*' belong to the Delta "
            f"protocol's features and cannot be set by users")


def check_system_domain(domain: str) -> None:
    """Rule 2."""
    if domain not in SYSTEM_DOMAINS:
        raise InvalidTableOperationError(
            f"'{domain}' is not a system domain tahoe maintains (those are {sorted(SYSTEM_DOMAINS)})")


def check_feature_domain_removable(domain: str, protocol: Protocol) -> None:
    """Rule 3."""
    owner = FEATURE_DOMAINS.get(domain)
    if owner is None or is_feature_supported(protocol, owner):
        raise InvalidTableOperationError(
            f"metadata domain '{domain}' belongs to a feature the table still supports; drop the feature first")


def check_supported(a: Attempt) -> None:
    """Rule 4, for the attempt."""
    if a.domains and not is_feature_supported(a.protocol, "domainMetadata"):
        raise InvalidTableOperationError(
            "domain metadata needs the table feature 'domainMetadata' (add it first)")
