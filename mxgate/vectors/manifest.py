"""The manifest: SHA-256 and size of every vector file, and checks against it.

``manifest.json`` is itself protected: it carries ``self_sha256`` (the hash of its canonical
JSON without that field) and must be byte-identical to the canonical serialisation of what it
parses to. Any flipped bit or truncation anywhere in the set is therefore caught: in a data file
by its hash, in the manifest by the parse, the self-hash or the canonical-form check.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mxgate.vectors.schema import SCHEMA, SCHEMA_VERSION

MANIFEST = "manifest.json"


def canonical_json(obj: Any) -> bytes:
    """The one serialisation every vector JSON file uses: sorted keys, ASCII, newline-terminated."""
    return (json.dumps(obj, sort_keys=True, indent=1, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class IntegrityError(ValueError):
    """A vector file does not match the manifest (or the manifest is damaged); names the file."""

    def __init__(self, file: str, problem: str) -> None:
        super().__init__(f"{file}: {problem}")
        self.file = file
        self.problem = problem


def build(files: dict[str, bytes], generator_version: str, families: dict[str, dict[str, Any]]) -> bytes:
    """Manifest bytes for a complete set of vector files (name -> bytes)."""
    body: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "generator_version": generator_version,
        "families": families,
        "files": {name: {"bytes": len(data), "sha256": sha256(data)} for name, data in sorted(files.items())},
    }
    body["self_sha256"] = sha256(canonical_json(body))
    return canonical_json(body)


def parse(raw: bytes) -> dict[str, Any]:
    """The manifest's content, after proving it undamaged; IntegrityError otherwise."""
    try:
        body = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IntegrityError(MANIFEST, f"damaged (not valid JSON: {error})") from None
    if not isinstance(body, dict) or "self_sha256" not in body or not isinstance(body.get("files"), dict):
        raise IntegrityError(MANIFEST, "damaged (self_sha256 or files missing)")
    claimed = body.pop("self_sha256")
    if sha256(canonical_json(body)) != claimed:
        raise IntegrityError(MANIFEST, "damaged (self_sha256 does not match its content)")
    body["self_sha256"] = claimed
    if canonical_json(body) != raw:
        raise IntegrityError(MANIFEST, "damaged (bytes are not the canonical form of its content)")
    if body.get("schema") != SCHEMA or body.get("schema_version") != SCHEMA_VERSION:
        raise IntegrityError(MANIFEST, f"schema {body.get('schema')!r} v{body.get('schema_version')} is not {SCHEMA} v{SCHEMA_VERSION}")
    return body


def check_file(name: str, raw: bytes, entry: dict[str, Any]) -> None:
    """IntegrityError naming ``name`` unless its bytes are the ones the manifest pins."""
    if len(raw) != entry["bytes"]:
        kind = "truncated" if len(raw) < entry["bytes"] else "has extra bytes"
        raise IntegrityError(name, f"{kind}: {len(raw)} bytes, manifest says {entry['bytes']}")
    digest = sha256(raw)
    if digest != entry["sha256"]:
        raise IntegrityError(name, f"sha256 {digest[:16]}... does not match the manifest's {entry['sha256'][:16]}...")


@dataclass
class FileStatus:
    name: str
    ok: bool
    message: str


def verify_dir(directory: Path) -> list[FileStatus]:
    """Check every file of a vector folder against its manifest; one status per file.

    Files the manifest does not list and files it lists that are missing are reported too.
    """
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        return [FileStatus(MANIFEST, False, f"missing from {directory}")]
    try:
        body = parse(manifest_path.read_bytes())
    except IntegrityError as error:
        return [FileStatus(error.file, False, error.problem)]
    out = [FileStatus(MANIFEST, True, f"self-hash {body['self_sha256'][:16]}...")]
    for name, entry in sorted(body["files"].items()):
        path = directory / name
        if not path.is_file():
            out.append(FileStatus(name, False, "missing"))
            continue
        try:
            check_file(name, path.read_bytes(), entry)
        except IntegrityError as error:
            out.append(FileStatus(name, False, error.problem))
        else:
            out.append(FileStatus(name, True, f"{entry['bytes']} bytes, sha256 {entry['sha256'][:16]}..."))
    listed = set(body["files"]) | {MANIFEST}
    for path in sorted(directory.iterdir()):
        if path.name not in listed:
            out.append(FileStatus(path.name, False, "not listed in the manifest"))
    return out


def read_verified(directory: Path, name: str) -> bytes:
    """The bytes of one vector file after checking them (and the manifest); IntegrityError otherwise."""
    directory = Path(directory)
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise IntegrityError(MANIFEST, f"missing from {directory}")
    body = parse(manifest_path.read_bytes())
    if name not in body["files"]:
        raise IntegrityError(name, "not listed in the manifest")
    path = directory / name
    if not path.is_file():
        raise IntegrityError(name, f"missing from {directory}")
    raw = path.read_bytes()
    check_file(name, raw, body["files"][name])
    return raw
