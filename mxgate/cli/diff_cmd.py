"""``mxgate diff A B [--op OP ...]``: run two backends on the same Hypothesis inputs (the suite's
boundary classes) and sort every differing output unit by what the oracle says: *explained* by
the two declared profiles (the profile fields are named) or *unexplained* (the side that
deviates from the oracle under its own declared profile is named). Unexplained differences are
shrunk to minimal inputs, printed with mxgate explain's classification and written as
golden-vector cases (docs/diff.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mxgate.cli import CliError

DEFAULT_EXAMPLES = 200
DEFAULT_SEED = 0
DEFAULT_MAX_CASES = 8
DEFAULT_OUT = "mxgate-diff"

EPILOG = f"""exit status:
  0    no unexplained difference: every unit where A and B differ is explained by their
       declared profiles (or nothing differed)
  1    at least one unexplained difference, or a fault of either side: an op that raised,
       crashed its worker process, ran past --timeout or wrote into an input it does not own,
       or a backend that raised, crashed or exited while loading (each side loads in a worker
       process of its own)
  2    usage error, said in one line before anything runs: an unknown backend name or a spec
       that names no backend, a backend not available here, an --op one side does not
       implement, that the diff cannot generate inputs for or that cannot run here, nothing
       both sides implement that can be diffed, a bad --examples/--seed/--max-cases/--timeout,
       an --out path that is not a folder
  3    internal error
  130  interrupted
  141  standard output was closed early (mxgate diff ... | head)

A and B are registered backend names (mxgate backends) or module.path:attr specs. Without --op
every op both implement is searched; ops the diff cannot generate inputs for yet are listed as
'not covered by diff'. The search is deterministic: the same --seed (default {DEFAULT_SEED}) and
--examples (default {DEFAULT_EXAMPLES} inputs per op) give the same inputs, counts and cases.
Case files go to --out (default ./{DEFAULT_OUT}/), one JSON document and one .npz per pair, in
the golden-vector format (docs/vectors.md)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diff", help="differential search between two backends, sorted by the oracle",
                            description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", metavar="A", help="first backend: a registered name or module.path:attr")
    parser.add_argument("b", metavar="B", help="second backend, same forms")
    parser.add_argument("--op", action="append", default=None, metavar="OP",
                        help="op to search (repeatable; default: every op both implement)")
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, metavar="N",
                        help=f"Hypothesis inputs per op (default {DEFAULT_EXAMPLES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"search seed (default {DEFAULT_SEED})")
    parser.add_argument("--max-cases", type=int, default=DEFAULT_MAX_CASES, metavar="N",
                        help=f"kinds of unexplained difference shrunk per op (default {DEFAULT_MAX_CASES}); "
                             "later kinds are counted, not shrunk")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"folder for the case files (default ./{DEFAULT_OUT}, made when a case is written)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="per-call limit of a backend op before its worker is killed (default 300)")
    parser.set_defaults(run=run)


def _validate_numbers(args: argparse.Namespace) -> None:
    if args.examples < 1:
        raise CliError(f"--examples must be at least 1, got {args.examples}")
    if args.seed < 0:
        raise CliError(f"--seed must be a non-negative integer, got {args.seed}")
    if args.max_cases < 0:
        raise CliError(f"--max-cases must be 0 or more, got {args.max_cases}")
    if args.timeout is not None and not (0 < args.timeout < float("inf")):
        raise CliError(f"--timeout must be a positive number of seconds, got {args.timeout!r}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out}: exists and is not a folder")
    if not out.exists() and not out.absolute().parent.is_dir():
        raise CliError(f"--out {args.out}: its parent folder does not exist")


def _plan(args: argparse.Namespace, a, b) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    """(ops to search, ops both implement that the diff does not cover, (op, why) not runnable here)."""
    from mxgate.conformance import differential
    from mxgate.op_table import TABLE
    from mxgate.oracle import profiles

    ops_a, ops_b = a.ops(), b.ops()
    sides = (("A", args.a, a, ops_a), ("B", args.b, b, ops_b))
    if args.op:
        for op in args.op:
            if op not in TABLE and op not in differential.SPECS:
                raise CliError(f"--op must be one of {', '.join(sorted(TABLE))}; got {op!r}")
            for label, name, _, table in sides:
                if op not in table:
                    raise CliError(f"--op {op}: {label} ({name}) does not implement it; it implements "
                                   f"{', '.join(sorted(table)) or 'nothing'}")
            if not differential.covered(op):
                raise CliError(f"--op {op}: not covered by diff (no input generator for it yet); covered: "
                               f"{', '.join(differential.SPECS)}")
        wanted = list(dict.fromkeys(args.op))
    else:
        wanted = [op for op in ops_a if op in ops_b]
    order = {op: i for i, op in enumerate(differential.SPECS)}
    searched = sorted((op for op in wanted if differential.covered(op)), key=order.__getitem__)
    uncovered = sorted(op for op in wanted if not differential.covered(op))
    blocked: list[tuple[str, str]] = []
    for op in list(searched):
        for label, name, backend, table in sides:
            why = backend.available_for(op)
            if not why:
                blocked.append((op, f"{label} ({name}): {why.reason}"))
                searched.remove(op)
                break
            if table[op].profile not in profiles.names():
                raise CliError(f"{label} ({name}) declares profile {table[op].profile!r} for {op}, which is not "
                               f"registered ({', '.join(profiles.names())})")
    if args.op and blocked:
        raise CliError(f"--op {blocked[0][0]} cannot run here: {blocked[0][1]}")
    if not searched:
        if not wanted:
            raise CliError(f"A ({args.a}) and B ({args.b}) implement no op in common "
                           f"(A: {', '.join(sorted(ops_a)) or 'none'}; B: {', '.join(sorted(ops_b)) or 'none'})")
        detail = "; ".join([f"not covered by diff: {', '.join(uncovered)}"] * bool(uncovered)
                           + [f"{op} not runnable here ({why})" for op, why in blocked])
        raise CliError(f"no op both A ({args.a}) and B ({args.b}) implement can be diffed here: {detail}")
    return searched, uncovered, blocked


def _counts(counter, show) -> str:
    return ", ".join(f"{show(key)} {n}" for key, n in counter.most_common())


def _op_line(result) -> str:
    from mxgate.conformance.differential import OpResult

    r: OpResult = result
    differ = r.explained_total + r.unexplained_total
    parts = [f"{r.examples} examples, {r.units} units compared, {differ} differ"]
    if r.explained:
        parts.append(f"{r.explained_total} explained ({_counts(r.explained, lambda f: '+'.join(f) or '?')})")
    if r.unexplained:
        deviating = _counts(r.unexplained, lambda sides: " and ".join(sides) + " deviates")
        parts.append(f"{r.unexplained_total} unexplained ({deviating})")
    if r.nan_equal:
        parts.append(f"{r.nan_equal} NaN against NaN equal under the op's nan_equal rule")
    if r.outside_contract:
        parts.append(f"{r.outside_contract} examples outside a side's contract")
    if r.faults:
        parts.append(f"{len(r.faults)} fault(s)")
    if r.kinds:
        parts.append(f"{len(r.kinds)} kind(s) of unexplained difference, {len(r.cases)} shrunk")
    return "; ".join(parts) + f" ({r.seconds:.1f} s)"


def _print_cases(result, names: dict[str, str]) -> None:
    from mxgate.conformance import differential as d

    spec = d.SPECS[result.op]
    for n, case in enumerate(result.cases, start=1):
        print(f"  unexplained {result.op} #{n}, shrunk to {d.input_text(case.args)}:")
        for diff, (cls, detail) in list(zip(case.new, case.classes))[:4]:
            who = ", ".join(f"{s} ({names[s]})" for s in diff.deviating)
            if diff.index < 0:
                print(f"    {diff.note}; deviates: {who}")
                continue
            kind = spec.kinds[spec.outputs.index(diff.output)]
            print(f"    {d.show_input(spec, case.args, diff)}: {diff.output} A {d.show_unit(kind, diff.a)}, "
                  f"B {d.show_unit(kind, diff.b)}; oracle {result.profile_a} {d.show_unit(kind, diff.oracle_a)}, "
                  f"{result.profile_b} {d.show_unit(kind, diff.oracle_b)}; deviates: {who}")
            print(f"      explain: {cls}: {detail}")
        if len(case.new) > 4:
            print(f"    ... and {len(case.new) - 4} more new difference(s) in this input")
    for fault in result.faults:
        print(f"  fault {result.op}: {fault.side} ({names[fault.side]}) {fault.cause}, on {d.input_text(fault.args)}")
    for note in result.notes:
        print(f"  {result.op}: {note}")


def run(args: argparse.Namespace) -> int:
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
    # The inputs hold NaN, Inf and overflowing values on purpose: the backends' NumPy casts warn
    # about them on every call, in the worker processes, between the report's lines.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::RuntimeWarning")
    _validate_numbers(args)
    from mxgate import kernels
    from mxgate.kernels import isolation

    for name in (args.a, args.b):
        kernels.check_name(name)  # unknown names and broken specs: one line, status 2
    timeout = args.timeout or isolation.DEFAULT_TIMEOUT_S
    try:
        a, b = _load_sides(args, timeout)
    except _SideFault as fault:
        print(_header(args), flush=True)
        print(f"mxgate diff: fault: {fault}; no op searched, no case written; exit status 1", flush=True)
        return 1
    try:
        return _diff(args, a, b)
    finally:
        isolation.close_all([a, b])


def _header(args: argparse.Namespace) -> str:
    return (f"mxgate diff: A = {args.a}, B = {args.b}, device {args.device}, seed {args.seed}, "
            f"{args.examples} examples per op")


def _load_sides(args: argparse.Namespace, timeout: float):
    """Both backends, each built and described in a worker of its own (never in this process: a
    backend that raises, crashes or exits while loading is a fault of its side, status 1)."""
    from mxgate.kernels import isolation

    names = [args.a, args.b]
    if args.a == args.b:  # one name twice: a worker for each side, one start after the other (starts are keyed by name)
        loaded = [isolation.start_all([name], args.device, timeout=timeout)[name] for name in names]
    else:  # both start side by side
        started = isolation.start_all(names, args.device, timeout=timeout)
        loaded = [started[name] for name in names]
    problem: Exception | None = None
    for label, name, result in zip("AB", names, loaded):
        if isinstance(result, isolation.BackendFault):
            problem = _SideFault(f"{label} ({name}): {result.cause}")
        elif isinstance(result, Exception):
            problem = result
        elif not (status := result.available()):
            problem = CliError(f"{label} ({name}) is not available here: {status.reason}")
        if problem is not None:
            isolation.close_all([r for r in loaded if not isinstance(r, Exception)])
            raise problem
    return loaded[0], loaded[1]


class _SideFault(Exception):
    """A side that did not load: reported as that side's fault (status 1), not a usage error."""


def _diff(args: argparse.Namespace, a, b) -> int:
    from mxgate.conformance import differential

    searched, uncovered, blocked = _plan(args, a, b)
    names = {"A": args.a, "B": args.b}
    print(_header(args), flush=True)
    if uncovered:
        print(f"not covered by diff (no input generator yet): {', '.join(uncovered)}")
    for op, why in blocked:
        print(f"not run here: {op}: {why}")
    results = []
    for i, op in enumerate(searched, start=1):
        print(f"[{i}/{len(searched)}] {op} (A {a.op(op).profile}, B {b.op(op).profile}): ", end="", flush=True)
        result = differential.diff_op(op, a, b, examples=args.examples, seed=args.seed, max_cases=args.max_cases)
        print(_op_line(result), flush=True)
        _print_cases(result, names)
        sys.stdout.flush()
        results.append(result)
    written = _write(results, args)
    unexplained = sum(r.unexplained_total for r in results)
    faults = sum(len(r.faults) + len(r.notes) for r in results)
    explained = sum(r.explained_total for r in results)
    status = 1 if any(not r.clean for r in results) else 0
    print(f"mxgate diff: {len(results)} op(s) searched, {explained} explained and {unexplained} unexplained "
          f"differing units, {faults} fault(s); {written}; seed {args.seed}; exit status {status}")
    return status


def _write(results, args: argparse.Namespace) -> str:
    from mxgate.conformance import differential

    count = sum(len(r.cases) for r in results)
    if not count:
        return "no case written"
    family, _doc, text, arrays = differential.write_cases(results, args.a, args.b, args.seed)
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    (out / f"{family}.json").write_bytes(text)
    (out / f"{family}.npz").write_bytes(arrays)
    return f"{count} case(s) written to {out / family}.json and .npz"


if __name__ == "__main__":  # pragma: no cover
    from mxgate.cli import main

    sys.exit(main(["diff", *sys.argv[1:]]))
