"""Line numbers for validation errors in YAML files (`.github/debate.yml`, plan
frontmatter): every error names its key and the line it is on, an unknown key
included, not only YAML syntax errors (docs/configuration.md)."""

from __future__ import annotations

from collections.abc import Sequence

import yaml
from pydantic import ValidationError


def key_line(text: str, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the key (or list item) ``loc`` points at; for a path
    that does not exist, the line of the deepest part that does."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line: int | None = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if kv[0].value == str(part)), None)
            if match is None:
                return line
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def located_errors(exc: ValidationError, text: str | None) -> list[str]:
    """One ``line N: key.path: problem`` string per error (no line where unknown)."""
    out = []
    for err in exc.errors():
        loc = [p for p in err["loc"] if isinstance(p, str | int)]
        path = ".".join(str(p) for p in loc) or "(root)"
        line = key_line(text, loc) if text is not None and loc else None
        where = f"line {line}: " if line is not None else ""
        out.append(f"{where}{path}: {err['msg']}")
    return out
