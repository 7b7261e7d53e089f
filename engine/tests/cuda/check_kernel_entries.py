"""Every kernel entry point begins with ember::begin_after_previous_grid().

Under programmatic dependent launch (EMBER_CUDA_PDL=1) a kernel in the graph may start
before the kernel it follows has finished; one that touched memory before that call
would race with it. Only a GPU with such launches could show the race, and then only
sometimes, so this reads the sources instead: for each `extern "C" __global__`
definition in the kernels folder, the first statement of its body must be the call.

The one exception is a file in EARLY_READERS: its entries begin with
ember::allow_next_grid() and wait inside (ember::wait_previous_grid()) once they have
read what no kernel of a run writes; the file must call that wait.

Usage: check_kernel_entries.py KERNELS_DIR. Exits 1 naming each entry that does not.
"""
import pathlib
import re
import sys

WAIT = "ember::begin_after_previous_grid();"
EARLY = "ember::allow_next_grid();"
INNER_WAIT = "wait_previous_grid();"
ENTRY = re.compile(r'extern\s+"C"\s+__global__\b')
# Files whose kernels read the plan's constants before the wait, and why that is safe.
EARLY_READERS = {
    "gemm_wgmma.cu": "copies w and bias (constants: no kernel of a run writes them) into "
                     "its ring before the wait; x and y only after it",
}


def first_statement(body):
    """The text of a body up to its first ';', without macro line continuations."""
    text = body.replace("\\\n", "\n")
    return " ".join(text.split(";", 1)[0].split()) + ";"


def entries_missing_wait(source, early=False):
    """(entry name, first statement) for each entry whose body does not begin with WAIT
    (or, with early, with EARLY in a source that calls INNER_WAIT), and the number of
    entries seen."""
    allowed = (WAIT, EARLY) if early and INNER_WAIT in source.replace(WAIT, "") else (WAIT,)
    missing, seen = [], 0
    for match in ENTRY.finditer(source):
        seen += 1
        brace = source.index("{", match.end())
        signature = source[match.end():brace]
        name = re.findall(r"([A-Za-z_][A-Za-z0-9_#]*)\s*\(", signature)
        name = next((n for n in reversed(name) if n not in ("__launch_bounds__", "__cluster_dims__")),
                    "?")
        statement = first_statement(source[brace + 1:])
        if statement not in allowed:
            missing.append((name, statement))
    return missing, seen


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    # The control: an entry without the call is caught, one with it is not.
    control = 'extern "C" __global__ void k(int p) {\n  do_work(p);\n}\n'
    assert entries_missing_wait(control) == ([("k", "do_work(p);")], 1), "detector is broken"
    assert entries_missing_wait(control.replace("{\n", "{\n  " + WAIT + "\n")) == ([], 1)
    # An early reader's entry passes only in a listed file that waits inside.
    early = control.replace("{\n", "{\n  " + EARLY + "\n")
    assert entries_missing_wait(early) == ([("k", EARLY)], 1), "detector is broken"
    assert entries_missing_wait(early, early=True) == ([("k", EARLY)], 1), "detector is broken"
    assert entries_missing_wait(early + "void g() { ember::" + INNER_WAIT + " }\n", early=True) == ([], 1)

    failures, total = [], 0
    for path in sorted(pathlib.Path(argv[1]).glob("*.cu*")):
        missing, seen = entries_missing_wait(path.read_text(), early=path.name in EARLY_READERS)
        total += seen
        failures += [(path.name, name, statement) for name, statement in missing]
    for file, name, statement in failures:
        print(f"{file}: kernel {name} begins with '{statement[:80]}', not '{WAIT}': "
              "put the call first, so that under EMBER_CUDA_PDL it waits for the kernel "
              "before it")
    if total == 0:
        print(f"no kernel entry points found under {argv[1]}")
        return 1
    print(f"{total} kernel entry points, {total - len(failures)} begin with {WAIT} "
          f"(or, in {', '.join(sorted(EARLY_READERS))}, {EARLY} and wait inside)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
