"""What the code and the docs cite exists in this repository (issue 34).

Three rules, each a test:

1. **No private references.** No tracked file cites the team's private reference notes (the folder
   ``shared/reference`` outside the repository, or its files by name): what the code relies on upstream is written
   down in ``docs/upstream.md`` with its upstream source. This file is the only one allowed to name them.
2. **House rules resolve.** Every "house rule N" (also "house rules N and M") in a tracked file names a rule of the
   numbered list under "## House rules" in ``docs/development.md``.
3. **Repository paths resolve.** Every repository path named in a comment or docstring of the Python code under
   ``scheduling/``, ``gangweb/``, ``localcluster/``, ``bench/`` and ``client/``, in a ``#`` comment of a shell or
   YAML file there, or anywhere in ``docs/*.md``, exists. The rule for what counts as a repository path:

   - a token that starts with one of this repository's top-level folders (``TOP_LEVEL``, at the start of a word:
     ``scheduling/…``, not ``pkg/scheduling/…``), and ends in a file extension (``bench/README.md``) or ``/``
     (``localcluster/crds/``); a trailing full stop or comma is punctuation, not part of the path;
   - a glob (``localcluster/crds/*.yaml``) must match at least one file; a token with a placeholder
     (``<name>``, ``{a,b}``) or a ``...`` is not a path;
   - ``module/path.Name`` (``scheduling/security/addresses.AddressPolicy.parse``) names a Python object: the module file
     (``scheduling/security/addresses.py``) must exist;
   - a path right after an output option (``OUTPUT_OPTIONS``: ``--json bench/results/soak.json``) is a file the
     command writes, so it need not exist yet;
   - **upstream paths are not ours**: a token is skipped when the word just before it (across backticks, quotes,
     and a line break; a ``@version`` suffix ignored) is an upstream project's name
     (``UPSTREAM_NAMES``: "KAI `docs/fairness/README.md`", "k8s.io/api@v0.37.2 scheduling/v1beta1/types.go"). So
     an upstream path that starts like one of our folders must be written right after its project's name.
     ``docs/upstream.md`` names upstream paths on purpose and is not checked by this rule.
4. **Sections of docs/upstream.md resolve.** A citation "docs/upstream.md, <section>" names a section by (at least)
   the first two words of its heading ("docs/upstream.md, KAI Queue", "…, Kubernetes Workload"), on the same line;
   a Markdown link ``upstream.md#anchor`` names an existing heading's anchor (GitHub's slug).
"""
from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

TOP_LEVEL = ("scheduling", "docs", "tests", "bench", "localcluster", "client", "charts", "templates", "gangweb",
             "scripts", "static", "docker", ".ci")
CODE_FOLDERS = ("scheduling", "gangweb", "localcluster", "bench", "client")
# Names after which a path is the upstream project's own (rule 3), compared case-insensitively.
UPSTREAM_NAMES = ("KAI", "KAI's", "Volcano", "Volcano's", "volcano-sh/apis", "kwok", "kwok's", "kwokctl",
                  "kwokctl's", "scheduler-plugins", "kubernetes", "Kubernetes'", "k8s.io/api", "website",
                  "controller-runtime", "envtest", "Kueue", "Kueue's", "KubeRay", "KubeRay's", "Trainer", "Trainer's")
NOT_CHECKED_FOR_PATHS = ("docs/upstream.md",)
OUTPUT_OPTIONS = ("--json", "--out", "--output", "-o")

PRIVATE_NOTES = re.compile(
    r"shared/" r"reference|\b(?:kai|k8s-gang-apis|api-changes-2026|local-k8s|other-schedulers)\.md\b")
HOUSE_RULE = re.compile(r"house rules? (\d+(?:(?:, | and | or |-)\d+)*)", re.IGNORECASE)
PATH_TOKEN = re.compile(r"(?<![\w./@:-])((?:" + "|".join(re.escape(t) for t in TOP_LEVEL) + r")/[\w./*<>{},-]*)")
WORD_BEFORE = re.compile(r"([\w.'/@-]+)[\s`'\"]*$")
COMMENT_MARK = re.compile(r"^\s*#+\s?")


def tracked_files() -> list[str]:
    """Repository-relative paths of every tracked file (``git ls-files``), or of every file when git is absent."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "var", "node_modules", "__pycache__"}
        return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
                if p.is_file() and not skip.intersection(p.relative_to(ROOT).parts)]


def read_text(path: str) -> str | None:
    """The file's text, or None for a binary file."""
    try:
        return (ROOT / path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def python_prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a Python module, as (line number, text) pairs."""
    out: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                for offset, line in enumerate(first.value.value.splitlines()):
                    out.append((first.lineno + offset, line))
    return out


def hash_comments(source: str) -> list[tuple[int, str]]:
    """The ``#`` comments of a shell or YAML file (a ``#`` at the start of a word), as (line number, text)."""
    out = []
    for number, line in enumerate(source.splitlines(), 1):
        match = re.search(r"(?:^|\s)(#.*)$", line)
        if match:
            out.append((number, match.group(1)))
    return out


def prose_of(path: str) -> list[tuple[int, str]]:
    """The text of `path` in which rule 3 looks for paths: prose only for code, everything for docs."""
    text = read_text(path)
    if text is None:
        return []
    if path.endswith(".py"):
        return python_prose(text)
    if path.endswith((".sh", ".yaml", ".yml")):
        return hash_comments(text)
    return list(enumerate(text.splitlines(), 1))


def path_tokens(line: str, previous: str = "") -> list[str]:
    """Repository paths named in one line of prose (`previous`: the line before it, for the word before a token
    that starts a line), by the rule in this module's docstring."""
    found = []
    upstream = {n.lower() for n in UPSTREAM_NAMES}
    for match in PATH_TOKEN.finditer(line):
        token = match.group(1).rstrip(".,")
        if any(mark in token for mark in ("<", ">", "{", "}", "...")):
            continue
        if not (token.endswith("/") or re.search(r"\.[A-Za-z0-9]+$", token)):
            continue
        head = COMMENT_MARK.sub("", line[:match.start()])
        if not head.strip(" `'\""):
            head = COMMENT_MARK.sub("", previous).rstrip() + " " + head
        before = WORD_BEFORE.search(head)
        word = before.group(1).split("@", 1)[0] if before else ""
        if word.lower() in upstream or word in OUTPUT_OPTIONS:
            continue
        found.append(token)
    return found


def path_exists(token: str) -> bool:
    """True when the path (or, for a glob, at least one match) is in the repository."""
    if "*" in token:
        return any(ROOT.glob(token.rstrip("/")))
    if (ROOT / token).exists():
        return True
    folder, _, name = token.rpartition("/")
    module = name.split(".", 1)[0]
    return "." in name and name.split(".", 1)[1][:1].isupper() and (ROOT / folder / f"{module}.py").is_file()


def house_rule_numbers() -> set[int]:
    """The numbers of the "## House rules" list in docs/development.md."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    section = text.split("## House rules", 1)[1].split("\n## ", 1)[0]
    return {int(n) for n in re.findall(r"^(\d+)\. ", section, re.MULTILINE)}


def test_no_tracked_file_cites_the_private_reference_notes():
    offenders = []
    for path in tracked_files():
        if path == THIS_FILE:
            continue
        text = read_text(path)
        for number, line in enumerate((text or "").splitlines(), 1):
            if PRIVATE_NOTES.search(line):
                offenders.append(f"{path}:{number}: {line.strip()}")
    assert offenders == [], "cite docs/upstream.md or the upstream source instead:\n" + "\n".join(offenders)


def test_every_house_rule_cited_is_defined():
    defined = house_rule_numbers()
    assert defined == set(range(1, max(defined) + 1)), "the house rules are numbered 1..N without gaps"
    offenders = []
    for path in tracked_files():
        text = read_text(path)
        for number, line in enumerate((text or "").splitlines(), 1):
            for match in HOUSE_RULE.finditer(line):
                cited = {int(n) for n in re.findall(r"\d+", match.group(1))}
                if cited - defined:
                    offenders.append(f"{path}:{number}: house rule {sorted(cited - defined)}")
    assert offenders == [], f"house rules defined: 1..{max(defined)}\n" + "\n".join(offenders)


def files_checked_for_paths() -> list[str]:
    """Code under CODE_FOLDERS (Python, shell, YAML) and docs/*.md, minus NOT_CHECKED_FOR_PATHS."""
    out = []
    for path in tracked_files():
        top = path.split("/", 1)[0]
        if path in NOT_CHECKED_FOR_PATHS:
            continue
        if top in CODE_FOLDERS and path.endswith((".py", ".sh", ".yaml", ".yml")):
            out.append(path)
        elif top == "docs" and path.endswith(".md"):
            out.append(path)
    return out


def test_every_repository_path_named_in_comments_docstrings_and_docs_exists():
    checked, offenders = 0, []
    for path in files_checked_for_paths():
        previous = ""
        for number, line in prose_of(path):
            for token in path_tokens(line, previous):
                checked += 1
                if not path_exists(token):
                    offenders.append(f"{path}:{number}: {token}")
            previous = line
    assert checked > 100, "the scan found paths to check (it would pass vacuously otherwise)"
    assert offenders == [], "paths that are not in the repository:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("see bench/README.md.", ["bench/README.md"]),
        ("(`localcluster/crds/`, scheduling/kube/kai_units.py)",
         ["localcluster/crds/", "scheduling/kube/kai_units.py"]),
        ("KAI `docs/fairness/README.md` says", []),
        ("KAI's docs/queues/README.md", []),
        ("kwokctl `pkg/kwokctl/components`", []),
        ("not pkg/scheduling/v2/queue_types.go", []),
        ("scheduling/backends/<name>.py and docs/{a,b}.md", []),
        ("the scheduling/ folder and scheduling.services", ["scheduling/"]),
        ("tests/unit/test_x", []),
        ("python -m bench.soak --json bench/results/soak-c4.json", []),
        ("`k8s.io/api@v0.37.2` `scheduling/v1beta1/types.go`", []),
        ("- `tests/unit/test_code_references.py` pins it", ["tests/unit/test_code_references.py"]),
        ("-f charts/gangweb/values.yaml", ["charts/gangweb/values.yaml"]),
        ("never scheduled by Volcano (docs/upstream.md, Volcano)", ["docs/upstream.md"]),
    ],
)
def test_what_counts_as_a_repository_path(line, expected):
    assert path_tokens(line) == expected


def test_the_word_before_a_path_may_end_the_line_before():
    assert path_tokens("# scheduling/v1beta1/types.go), filled by", "# (HighestUserDefinablePriority, k8s.io/api") == []
    assert path_tokens("scheduling/choices.py holds", "the phases are in") == ["scheduling/choices.py"]


def upstream_headings() -> list[str]:
    """The "## " headings of docs/upstream.md."""
    text = (ROOT / "docs" / "upstream.md").read_text(encoding="utf-8")
    return re.findall(r"^## (.+)$", text, re.MULTILINE)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def cites_a_section(cited: str, headings: list[str]) -> bool:
    """True when `cited` (the text after "docs/upstream.md, ") starts with a heading's first two words."""
    return any(cited.startswith(" ".join(word.rstrip(",") for word in h.split()[:2])) for h in headings)


def test_every_section_of_docs_upstream_cited_exists():
    headings = upstream_headings()
    slugs = {github_slug(h) for h in headings}
    assert {"kai-queue", "volcano-podgroup-and-queue", "the-local-control-planes-components"} <= slugs
    offenders, cited = [], 0
    for path in tracked_files():
        if path in (THIS_FILE, "docs/upstream.md"):
            continue
        for number, line in enumerate((read_text(path) or "").splitlines(), 1):
            for match in re.finditer(r"docs/upstream\.md`{0,2}, ([^)(;`]+)", line):
                cited += 1
                if not cites_a_section(match.group(1).strip(' "'), headings):
                    offenders.append(f"{path}:{number}: {match.group(0)}")
            for match in re.finditer(r"upstream\.md#([\w-]+)", line):
                cited += 1
                if match.group(1) not in slugs:
                    offenders.append(f"{path}:{number}: {match.group(0)}")
    assert cited > 30
    assert offenders == [], "sections of docs/upstream.md: " + "; ".join(headings) + "\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("cited", "expected"),
    [("KAI Queue", True), ("KAI fair share", True), ("Kubernetes Workload", True), ("The local control", True),
     ("Volcano", False), ("KAI `pkg/apis`", False), ("one section per", False)],
)
def test_what_counts_as_a_section(cited, expected):
    assert cites_a_section(cited, upstream_headings()) is expected


def test_a_missing_path_is_found():
    assert path_exists("docs/upstream.md")
    assert path_exists("localcluster/crds/*.yaml")
    assert not path_exists("docs/no-such-page.md")
    assert not path_exists("scheduling/no_such_folder/")
    assert path_exists("scheduling/security/addresses.AddressPolicy.parse")
    assert not path_exists("scheduling/no_such_module.AddressPolicy")
