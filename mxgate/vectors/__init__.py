"""Golden vectors: Wycheproof-style files of inputs and per-profile expected outputs.

One JSON document and one ``.npz`` per family (elements, scales, layouts, indexer, logits),
pinned by ``data/manifest.json``. Regenerate with ``mxgate vectors regen``; check with
``mxgate vectors verify``. docs/vectors.md describes the schema.
"""

from mxgate.vectors.generator import GENERATOR_VERSION, package_data_dir
from mxgate.vectors.loader import Case, VectorSet
from mxgate.vectors.manifest import IntegrityError, verify_dir
from mxgate.vectors.schema import SCHEMA, SCHEMA_VERSION

__all__ = [
    "GENERATOR_VERSION",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Case",
    "IntegrityError",
    "VectorSet",
    "package_data_dir",
    "verify_dir",
]
