"""The project's documents cite one another's paragraphs by title: a docstring says
(harness/perfmodel/README.md, "What a request costs a server"), a shipped database's
README says which paragraph it backs. The model's evidence moved out of the top-level
README into harness/perfmodel/README.md (2026-12-06), and a title cited in the wrong file,
or one renamed since, leaves a reader with nothing to find. These tests read every
tracked text file and check each citation of the model's notes against the titles that
file has, and the top-level README's own pointers to it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOTES = "harness/perfmodel/README.md"
#: a citation: the notes' path, then the title in double quotes (escaped in --help text),
#: possibly wrapped over lines of a docstring or a comment
CITATION = re.compile(NOTES.replace(".", r"\.")
                      + r"""(?:'s|,|:)?\s*\(?(?:"\s*")?\\?"(?P<title>[^"\\\s][^"\\]{2,200})""")


def titles(text: str) -> list[str]:
    """The bold titles that open the paragraphs of a Markdown file (whitespace folded)."""
    found = []
    for para in text.split("\n\n"):
        m = re.match(r"\*\*(.+?)\*\*", " ".join(para.split()))
        if m:
            found.append(m.group(1))
    return found


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    return [REPO / f for f in out if f.endswith((".py", ".md", ".toml", ".sh"))]


def citations(text: str) -> list[str]:
    """Each title cited from the notes, folded as a reader would read it (a wrapped
    comment's `#` removed; a --help string split before the title skipped over)."""
    cited = []
    for m in CITATION.finditer(text):
        title = re.sub(r"\n\s*#\s*", " ", m.group("title"))
        cited.append(" ".join(title.split()).rstrip(" \\"))
    return cited


def test_every_citation_of_the_model_notes_names_one_of_their_paragraphs():
    known = titles((REPO / NOTES).read_text())
    assert len(known) >= 40, len(known)
    cited, missing = 0, []
    for path in tracked_text_files():
        if path.name == "preregistered.md":
            continue  # written before their runs; they stay as committed
        for title in citations(path.read_text(errors="replace")):
            cited += 1
            if not any(k.startswith(title) or title.startswith(k) for k in known):
                missing.append(f"{path.relative_to(REPO)}: {title!r}")
    assert cited >= 40, cited  # the docstrings, tests, experiment files and set READMEs
    assert not missing, "\n".join(missing)


def test_the_citation_reader_folds_wrapped_titles():
    """The reader above, on the three ways a title wraps here."""
    doc = ('(harness/perfmodel/README.md, "What a request costs\na server")\n'
           '# harness/perfmodel/README.md, "Whose noise\n    # fails a repeat"\n'
           '"(harness/perfmodel/README.md, "\n    "\\"What a byte on the wire costs a worker\\")"')
    assert citations(doc) == ["What a request costs a server", "Whose noise fails a repeat",
                              "What a byte on the wire costs a worker"]


def test_the_notes_list_their_paragraphs_and_the_readme_points_to_them():
    """The notes' contents list is their titles in order, and the top-level README names
    both moved files where a reader looks: the model's section and the layout."""
    text = (REPO / NOTES).read_text()
    listed = re.findall(r"^- (.+)$", text.split("\n\n**", 1)[0], re.M)
    assert listed == [t.rstrip(".") for t in titles(text)]
    readme = (REPO / "README.md").read_text()
    model = readme.split("## Performance model", 1)[1].split("\n## ", 1)[0]
    assert f"**The evidence, experiment by experiment** (`{NOTES}`)" in model
    assert "README.md: the model's evidence" in readme.split("## Layout", 1)[1]
    assert "`.ci/README.md`" in readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert (REPO / ".ci" / "README.md").read_text().startswith("# How long `make test` takes")
