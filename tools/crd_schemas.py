"""Write the Karpenter CRD schemas carpool ships (`shared/carpool/api/crds/karpenter-<version>.json`).

The source is Karpenter's own CRD files, unmodified (`tests/data/karpenter-crds-<version>/`, copied from
`aws/karpenter-provider-aws` `pkg/apis/crds/` at the tag); the output is `carpool.api.crd_schema.compact`
of them: each kind's `openAPIV3Schema` without descriptions, read in well under a millisecond at a cold
start. `tests/unit/api/test_crd_schema_walk.py` fails when the two disagree; run this after copying a new
release's CRDs (and bump `KARPENTER_VERSION`).

Usage (from the repo root):
    PYTHONPATH=shared .venv/bin/python tools/crd_schemas.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from carpool.api import crd_schema

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "data" / f"karpenter-crds-{crd_schema.KARPENTER_VERSION}"
TARGET = ROOT / "shared" / "carpool" / "api" / "crds" / f"karpenter-{crd_schema.KARPENTER_VERSION}.json"


def render(source: Path = SOURCE) -> str:
    """The shipped file's text for the CRDs in `source`."""
    crds = [yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            for path in sorted(source.glob("*.yaml"))]
    return json.dumps(crd_schema.compact(crds), separators=(",", ":"), sort_keys=True) + "\n"


def main() -> int:
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(render())
    print(f"wrote {TARGET.relative_to(ROOT)} from {SOURCE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
