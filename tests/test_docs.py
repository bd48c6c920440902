"""The documentation runs as pasted: every code block of README.md and docs/*.md, the quickstart
script and notebook, and the options page lists every option and flag there is.

Each page runs in a folder of its own that starts holding the sample ``images.csv`` and
``images/`` (samples/sample_images.py): its Python blocks top to bottom in one interpreter, its
shell blocks at their place in the same folder (tests/run_doc_blocks.py). A block right after
``<!-- not run: REASON -->`` is skipped; one after ``<!-- own process -->`` is Python pasted into
a script file and run by a fresh interpreter, as a user would run it.
"""

import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUNNER = Path(__file__).resolve().parent / "run_doc_blocks.py"

LANGUAGES = {"python": "python", "bash": "shell", "sh": "shell", "console": "shell",
             "text": None}
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(not run|own process)\s*(?::\s*(.*?))?\s*-->$")
REMOTE = re.compile(r"\b(?:gs|gcs|s3|az|abfs|hdfs|https?|tcp|hf)://")
USAGE = re.compile(r"\[--?\w|\[[A-Z][A-Z_]*\]|<[A-Z][A-Z_]*>")  # [--flag], [OUT_DIR], <DIR>


def _relative(page):
    return page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else page.name


def page_blocks(page):
    """The fenced code blocks of ``page``: dicts of language, line, code and marker
    (``"not run"``, ``"own process"`` or None) with the marker's reason."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        marker = MARKER.match(before)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        blocks.append({"page": _relative(page), "line": i + 1, "language": opening.group(1),
                       "code": "".join(line + "\n" for line in lines[i + 1:end]),
                       "marker": marker.group(1) if marker else None,
                       "reason": (marker.group(2) or "") if marker else ""})
        i = end + 1
    return blocks


def block_problems(block):
    """Why ``block`` could not run as pasted (an empty list when it can)."""
    where = f"{block['page']}:{block['line']}"
    if block["language"] not in LANGUAGES:
        return [f"{where}: a block needs a language, one of {sorted(LANGUAGES)} (text for "
                f"what is not run), not {block['language']!r}"]
    if block["marker"] == "not run":
        return [] if block["reason"] else [f"{where}: <!-- not run: REASON --> needs a reason"]
    if LANGUAGES[block["language"]] is None:
        return []
    problems, code = [], block["code"]
    if REMOTE.search(code):
        problems.append(f"{where}: names a remote URL or cluster address "
                        f"({REMOTE.search(code).group(0)}...): mark it <!-- not run: REASON -->")
    if "..." in code:
        problems.append(f"{where}: holds a '...' placeholder")
    if LANGUAGES[block["language"]] == "shell":
        if USAGE.search(code):
            problems.append(f"{where}: usage brackets ({USAGE.search(code).group(0)}): write a "
                            f"concrete command, and the options in a table")
        if any(line.startswith(("$ ", "> ", "% ")) for line in code.splitlines()):
            problems.append(f"{where}: a prompt in a shell block cannot be pasted")
    return problems


def _steps(blocks):
    """The blocks to run, in order, as run_doc_blocks.py takes them."""
    steps = []
    for block in blocks:
        kind = LANGUAGES.get(block["language"])
        if block["marker"] == "not run" or kind is None:
            continue
        if block["marker"] == "own process":
            kind = "own process"
        steps.append({"page": block["page"], "line": block["line"], "kind": kind,
                      "code": block["code"]})
    return steps


def _environment(tmp_path):
    """This checkout's package first (also for the ``tfrecorder-lite`` command), this Python's
    commands on PATH, and caches inside ``tmp_path``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["HF_HOME"] = str(tmp_path / "huggingface")
    env["TFRECORDER_LITE_CACHE"] = str(tmp_path / "shard-cache")
    env["MPLBACKEND"] = "Agg"
    return env


def make_sample(folder):
    """The sample folder every page starts in (samples/sample_images.py)."""
    spec = importlib.util.spec_from_file_location("sample_images", SAMPLES / "sample_images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_sample(folder)


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_every_block_can_run_as_pasted(page):
    blocks = page_blocks(page)
    problems = [problem for block in blocks for problem in block_problems(block)]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _steps(page_blocks(p))], ids=_relative)
def test_every_block_runs(page, tmp_path):
    steps = _steps(page_blocks(page))
    folder = tmp_path / "folder"
    make_sample(folder)
    blocks_file = tmp_path / "blocks.json"
    blocks_file.write_text(json.dumps(steps), encoding="utf-8")
    run = subprocess.run([sys.executable, str(RUNNER), str(blocks_file)], cwd=folder,
                         env=_environment(tmp_path), capture_output=True, text=True,
                         timeout=900)
    if run.returncode:
        pytest.fail(run.stderr[-8000:], pytrace=False)


def test_the_harness_reports_a_failing_block_with_its_text_and_error(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nrows = 2\n```\n\n<!-- not run: needs a GPU -->\n"
                    "```python\nraise SystemExit('skipped')\n```\n\n```bash\ntest -f images.csv"
                    "\n```\n\n```python\nprint(rows / 0)\n```\n", encoding="utf-8")
    blocks = page_blocks(page)
    assert [b["marker"] for b in blocks] == [None, "not run", None, None]
    steps = _steps(blocks)
    assert [s["kind"] for s in steps] == ["python", "shell", "python"]
    make_sample(tmp_path)
    (tmp_path / "blocks.json").write_text(json.dumps(steps), encoding="utf-8")
    run = subprocess.run([sys.executable, str(RUNNER), "blocks.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "the block at line 16 failed" in run.stderr and "print(rows / 0)" in run.stderr
    assert "ZeroDivisionError" in run.stderr  # the first block's rows was there: one namespace


def test_the_rules_catch_what_cannot_be_pasted(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\ntfrecorder-lite convert images.csv out/ [--num-shards N]\n```\n"
                    "```python\ntfrecorder_lite.convert('gs://b/t.csv', 'out/')\n```\n"
                    "```\nno language\n```\n<!-- not run -->\n```python\nx = 1\n```\n"
                    "```python\ndf = pd.DataFrame({'label': ...})\n```\n", encoding="utf-8")
    problems = "\n".join(p for block in page_blocks(page) for p in block_problems(block))
    for expected in ("page.md:1: usage brackets ([--n", "page.md:4: names a remote URL",
                     "page.md:7: a block needs a language", "page.md:11: <!-- not run: REASON",
                     "page.md:14: holds a '...' placeholder"):
        assert expected in problems, (expected, problems)


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page):
    """GitHub's anchors of the headings of ``page``."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_every_link_leads_somewhere(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"{_relative(page)}: broken links {broken}"


# ------------------------------------------------------------------------ the options page

def _documented(section):
    """Every backticked name in the first cell of the table rows of ``section``."""
    names = set()
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|--") and not line.startswith("|---"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([^`]+)`", first))
    return names


def _sections(text):
    """``{heading: text}`` of the ``## `` sections of a page."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_options_page_lists_every_option_and_flag():
    import tfrecorder_lite
    from tfrecorder_lite import cli
    from tfrecorder_lite import table_dataset as direct

    sections = _sections((REPO / "docs" / "options.md").read_text(encoding="utf-8"))
    functions = {"to_tfrecord": [tfrecorder_lite.to_tfrecord], "load": [tfrecorder_lite.load],
                 "df.tfrecord.dataset": [direct.dataset], "validate": [tfrecorder_lite.validate],
                 "inspect": [tfrecorder_lite.inspect],
                 "verify": [tfrecorder_lite.verify, tfrecorder_lite.read_metadata],
                 "read_vertex": [tfrecorder_lite.read_vertex, tfrecorder_lite.read_yolo,
                                 tfrecorder_lite.to_coco],
                 "data_source": [tfrecorder_lite.data_source],
                 "RecordSampler": [tfrecorder_lite.RecordSampler],
                 "BackupAndRestore": [tfrecorder_lite.BackupAndRestore]}
    missing = []
    for key, calls in functions.items():
        heading = next((h for h in sections if f"`{key}`" in h), None)
        assert heading, f"docs/options.md has no section for {key}"
        documented = _documented(sections[heading])
        for call in calls:
            wanted = set(inspect.signature(call).parameters) - {"df"}
            missing += [f"{key}: {name}" for name in sorted(wanted - documented)]
    convert = next(h for h in sections if "`convert`" in h)
    missing += [f"convert: {name}" for name in ("source", "encoding")
                if name not in _documented(sections[convert])]

    cli_heading = next(h for h in sections if "command line" in h.lower())
    documented = _documented(sections[cli_heading])
    parser = cli._parser()
    commands = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    for parser_of in [parser, *commands.choices.values()]:
        for action in parser_of._actions:
            flags = [f for f in action.option_strings if f.startswith("--") and f != "--help"]
            if flags and not set(flags) & documented:
                missing.append(f"{parser_of.prog}: {flags[0]}")
    assert not missing, "not in docs/options.md: " + ", ".join(missing)


def test_the_options_page_shows_each_declared_option_at_its_doors_with_its_flag():
    from tfrecorder_lite import option_declarations

    sections = _sections((REPO / "docs" / "options.md").read_text(encoding="utf-8"))
    headings = {"to_tfrecord": "`to_tfrecord`", "convert": "`convert`",
                "dataset": "`df.tfrecord.dataset`", "validate": "`validate`", "load": "`load`",
                "data_source": "`data_source`"}
    assert set(headings) == set(option_declarations.DOORS)
    missing = []
    for door, key in headings.items():
        heading = next(h for h in sections if key in h)
        documented = _documented(sections[heading])
        missing += [f"{door}: {name}" for name in option_declarations.names(door)
                    if name not in documented]
    assert not missing, "not in docs/options.md: " + ", ".join(missing)
    writing = sections[next(h for h in sections if "`convert`" in h)]
    flags = {}
    for line in writing.splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 4:
            flags.update({name: re.findall(r"`(--[a-z0-9-]+)`", cells[3])
                          for name in re.findall(r"`([^`]+)`", cells[1])})
    wrong = [(option.name, flags.get(option.name)) for option in
             option_declarations.at("convert")
             if flags.get(option.name) != ([option.flag] if option.flag else [])]
    assert not wrong, f"docs/options.md's CLI column departs from the declaration: {wrong}"


# ----------------------------------------------------------------- quickstart and notebook

@pytest.mark.slow
def test_the_quickstart_script_runs(tmp_path):
    run = subprocess.run([sys.executable, str(SAMPLES / "quickstart.py"), "--workdir",
                          str(tmp_path)], env=_environment(tmp_path), capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-5000:]
    assert "80 images, 0 problem(s)" in run.stdout and "trained one epoch" in run.stdout
    assert (tmp_path / "records" / "metadata.json").is_file()


NOTEBOOK = SAMPLES / "quickstart.ipynb"


def test_the_committed_notebook_has_no_outputs():
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.slow
def test_the_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    import nbclient
    import nbformat

    for name, value in _environment(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where the notebook makes its folder
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(SAMPLES)}}).execute()
    outputs = {cell.source.splitlines()[0]: cell.outputs for cell in notebook.cells
               if cell.cell_type == "code"}
    text = json.dumps(notebook.cells, default=str)
    assert "trained one epoch" in text
    shown = [o for cell in outputs.values() for o in cell if "text/html" in o.get("data", {})]
    assert any("tfrl-report" in o["data"]["text/html"] for o in shown)  # the inspect report
    assert list(tmp_path.glob("tfrecorder_lite_notebook_*/records/metadata.json"))
