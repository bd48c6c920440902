"""Run one documentation page's code blocks in order, in the current folder (for test_docs.py).

Run: python run_doc_blocks.py BLOCKS.json
BLOCKS.json lists ``{"page", "line", "kind", "code"}`` in page order. ``python`` blocks share
one namespace, as if pasted one after another into one interpreter; ``shell`` blocks run in
``bash -e -o pipefail``; ``own process`` blocks are Python pasted into a script file of their
own and run by a fresh interpreter (as ``python script.py``: worker processes that a loader
spawns import that script again, as they would a user's). The first
failure ends the run with exit status 1, after printing the block and its error to stderr.
"""

import json
import linecache
import os
import subprocess
import sys
import tempfile
import traceback
import types


def _fail(block, error):
    print(f"{block['page']}: the block at line {block['line']} failed\n"
          f"----- block -----\n{block['code']}----- error -----\n{error}", file=sys.stderr)
    sys.exit(1)


def _run_python(block, namespace):
    name = f"{block['page']}:{block['line']}"
    code = block["code"]
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # for tracebacks
    try:
        exec(compile(code, name, "exec"), namespace)
    except BaseException:  # noqa: B036 (SystemExit and KeyboardInterrupt are failures too)
        _fail(block, traceback.format_exc())


def _run_process(block, scripts):
    if block["kind"] == "shell":
        command = ["bash", "-e", "-o", "pipefail", "-c", block["code"]]
    else:  # outside the page's folder, whose files the page's blocks may list
        script = os.path.join(scripts, f"block_{block['line']}.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(block["code"])
        command = [sys.executable, script]
    run = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    if run.returncode:
        _fail(block, f"exit status {run.returncode}\n{run.stdout[-3000:]}{run.stderr[-5000:]}")


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        blocks = json.load(f)
    page = types.ModuleType("__main__")  # the blocks' own __main__: what they define pickles
    sys.modules["__main__"] = page
    namespace = page.__dict__
    with tempfile.TemporaryDirectory(prefix="doc-blocks-") as scripts:
        for block in blocks:
            print(f"=== {block['page']}:{block['line']} ({block['kind']})", flush=True)
            if block["kind"] == "python":
                _run_python(block, namespace)
            else:
                _run_process(block, scripts)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
