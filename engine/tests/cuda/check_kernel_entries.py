"""Every kernel entry point begins with ember::begin_after_previous_grid().

Under programmatic dependent launch (EMBER_CUDA_PDL=1) a kernel in the graph may start
before the kernel it follows has finished; one that touched memory before that call
would race with it. Only a GPU with such launches could show the race, and then only
sometimes, so this reads the sources instead: for each `extern "C" __global__`
definition in the kernels folder, the first statement of its body must be the call.

Usage: check_kernel_entries.py KERNELS_DIR. Exits 1 naming each entry that does not.
"""
import pathlib
import re
import sys

WAIT = "ember::begin_after_previous_grid();"
ENTRY = re.compile(r'extern\s+"C"\s+__global__\b')


def first_statement(body):
    """The text of a body up to its first ';', without macro line continuations."""
    text = body.replace("\\\n", "\n")
    return " ".join(text.split(";", 1)[0].split()) + ";"


def entries_missing_wait(source):
    """(entry name, first statement) for each entry whose body does not begin with WAIT,
    and the number of entries seen."""
    missing, seen = [], 0
    for match in ENTRY.finditer(source):
        seen += 1
        brace = source.index("{", match.end())
        signature = source[match.end():brace]
        name = re.findall(r"([A-Za-z_][A-Za-z0-9_#]*)\s*\(", signature)
        name = next((n for n in reversed(name) if n not in ("__launch_bounds__", "__cluster_dims__")),
                    "?")
        statement = first_statement(source[brace + 1:])
        if statement != WAIT:
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

    failures, total = [], 0
    for path in sorted(pathlib.Path(argv[1]).glob("*.cu*")):
        missing, seen = entries_missing_wait(path.read_text())
        total += seen
        failures += [(path.name, name, statement) for name, statement in missing]
    for file, name, statement in failures:
        print(f"{file}: kernel {name} begins with '{statement[:80]}', not '{WAIT}': "
              "put the call first, so that under EMBER_CUDA_PDL it waits for the kernel "
              "before it")
    if total == 0:
        print(f"no kernel entry points found under {argv[1]}")
        return 1
    print(f"{total} kernel entry points, {total - len(failures)} begin with {WAIT}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
