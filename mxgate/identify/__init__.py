"""``mxgate identify``: infer an unknown kernel's profile fields from its bytes.

For each op a backend implements, probe inputs that separate every candidate value of every
profile field the op reads run through the backend (twice, on fresh copies); the oracle under
candidate profiles (a registered profile with fields replaced) says which field values explain
the bytes. Modules, one job each:

- ``candidates``: the values each profile field can take (registered profiles' and the type's);
- ``probes``: the probe pools of each op's inputs;
- ``drivers``: per op, how to call the backend on probes, the oracle's reference, output units;
- ``scorers``: the scorer ops' probe calls, judged within the oracle's bound;
- ``search``: deciding the fields from the backend's units;
- ``shrink``: the smallest input that still shows an unexplained unit;
- ``run``: one backend end to end (loading, calls, faults, inconsistency);
- ``report``: text, JSON evidence and the ready-to-paste ``profiles.register`` call.
"""

from __future__ import annotations

from mxgate.identify.run import IdentifyResult, OpIdentity, identify, supported_ops

__all__ = ["IdentifyResult", "OpIdentity", "identify", "supported_ops"]
