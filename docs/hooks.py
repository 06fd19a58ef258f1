"""mkdocs hook: publish the JSON Schemas of spec/ (the configuration's, the trace's, ...) at
``schemas/<name>.schema.json`` of the site, for editors' completion, without copying them
into docs/ (the link checker sees them as documentation files)."""
from pathlib import Path

from mkdocs.structure.files import File

SPEC = Path(__file__).resolve().parent.parent / "spec"


def on_files(files, config, **kwargs):
    for schema in sorted(SPEC.glob("*.schema.json")):
        files.append(File.generated(config, f"schemas/{schema.name}", abs_src_path=str(schema)))
    return files
