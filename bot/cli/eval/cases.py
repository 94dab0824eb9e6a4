"""Labelled case files: YAML (a list of cases) or JSONL (one case a line), or a
folder of them. A malformed file is refused with its file, line and reason
before anything is spent.

Arbitration cases carry the commented file inline (``files``) or name a local
git repository and commit (``repo``, ``commit``) to read it from; the read is
checked here, at load time, too.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from bot.core.errors import ConfigError

CASE_SUFFIXES = (".yml", ".yaml", ".jsonl")
MAX_FILE_BYTES = 256 * 1024  # one case file at the head; an eval case is an excerpt


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = ""
    commit: str = ""
    license: str = ""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)
    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
    source: Source | None = None
    note: str = ""
    label_source: Literal["human", "heuristic"] = "human"


class ArbitrateCase(_Base):
    kind: Literal["arbitrate"]
    comment: str = Field(min_length=1)
    path: str = Field(min_length=1)
    line: int | None = Field(default=None, ge=1)
    diff_hunk: str = ""
    files: dict[str, str] = Field(default_factory=dict)
    repo: str | None = None
    commit: str | None = None
    author: str = "review-bot[bot]"
    author_is_bot: bool = True
    pr_title: str = ""
    pr_body: str = ""
    expected: Literal["DISMISSED", "CONFIRMED"]

    @model_validator(mode="before")
    @classmethod
    def _upper_expected(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("expected"), str):
            data = {**data, "expected": data["expected"].strip().upper()}
        return data

    @model_validator(mode="after")
    def _has_the_file(self) -> ArbitrateCase:
        if self.files and (self.repo or self.commit):
            raise ValueError("give either files or repo and commit, not both")
        if not self.files and not (self.repo and self.commit):
            raise ValueError("give the file at the head: files (inline) or repo and commit")
        if self.files and self.path not in self.files:
            raise ValueError(f"files has no entry for path {self.path!r}")
        return self


class QuestionCase(_Base):
    kind: Literal["question"]
    question: str = Field(min_length=1)
    choices: list[str] = Field(default_factory=list)
    expected: str = Field(min_length=1)

    @model_validator(mode="after")
    def _expected_is_a_choice(self) -> QuestionCase:
        norm = [c.strip().lower() for c in self.choices]
        if len(set(norm)) != len(norm):
            raise ValueError("choices repeat")
        if self.choices and self.expected.strip().lower() not in norm:
            raise ValueError(f"expected {self.expected!r} is not one of the choices")
        return self


Case = Annotated[ArbitrateCase | QuestionCase, Field(discriminator="kind")]
_CASE: TypeAdapter[ArbitrateCase | QuestionCase] = TypeAdapter(Case)


@dataclass(frozen=True)
class Loaded:
    """A validated case, where it came from, and (arbitrate) the commented file."""

    case: ArbitrateCase | QuestionCase
    where: str  # "file:line"
    head_text: str | None = None  # the commented file at the head (arbitrate)

    @property
    def id(self) -> str:
        return self.case.id

    def fingerprint(self) -> str:
        """Changes whenever anything a model would see or the label changes (not
        with the note or the source: editing those pays for nothing again)."""
        seen = self.case.model_dump(mode="json", exclude={"note", "source", "label_source"})
        raw = json.dumps({"case": seen, "head": self.head_text}, sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()


# --- reading ------------------------------------------------------------------


def case_files(paths: Iterable[Path]) -> list[Path]:
    """The case files named, folders walked (sorted); a missing path is an error."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in CASE_SUFFIXES)
            if not found:
                raise ConfigError(f"{p}: no case files (*.yml, *.yaml, *.jsonl) in this folder")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise ConfigError(f"{p}: no such file or folder")
    return out


def load_cases(paths: Iterable[Path]) -> list[Loaded]:
    """Every case of every file, validated; ids unique across files."""
    seen: dict[str, str] = {}
    out: list[Loaded] = []
    for path in case_files(paths):
        for raw, line, key_lines in _records(path):
            where = f"{path}:{line}"
            case = _validate(raw, path, line, key_lines)
            if case.id in seen:
                raise ConfigError(
                    f"{where}: case id {case.id!r} repeats (first at {seen[case.id]})"
                )
            seen[case.id] = where
            head = _head_text(case, path, where) if isinstance(case, ArbitrateCase) else None
            out.append(Loaded(case, where, head))
    if not out:
        raise ConfigError("no cases: the case files are empty")
    return out


def _records(path: Path) -> Iterator[tuple[Any, int, Mapping[str, int]]]:
    """(record, its line, the line of each of its keys) for every case in a file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__})") from exc
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line), n, {}
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
        return
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}:{at}: YAML error: {problem}") from exc
    finally:
        loader.dispose()
    if data is None:
        return
    if not isinstance(data, list) or not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{path}:1: a case file is a YAML list of cases (- id: …)")
    for item, item_node in zip(data, node.value, strict=True):
        keys = {}
        if isinstance(item_node, yaml.MappingNode):
            keys = {str(k.value): k.start_mark.line + 1 for k, _ in item_node.value}
        yield item, item_node.start_mark.line + 1, keys


def _validate(
    raw: Any, path: Path, line: int, key_lines: Mapping[str, int]
) -> ArbitrateCase | QuestionCase:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}:{line}: a case is a mapping (id, kind, …)")
    label = f" (case {raw['id']!r})" if isinstance(raw.get("id"), str) else ""
    if raw.get("kind") not in ("arbitrate", "question"):
        at = key_lines.get("kind", line)
        raise ConfigError(f"{path}:{at}{label}: kind must be arbitrate or question")
    try:
        return _CASE.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(x) for x in err["loc"][1:]]  # [0] is the discriminator's tag
        at = key_lines.get(loc[0], line) if loc else line
        field = ".".join(loc)
        what = f"{field}: {err['msg']}" if field else err["msg"]
        raise ConfigError(f"{path}:{at}{label}: {what}") from exc


def _head_text(case: ArbitrateCase, path: Path, where: str) -> str:
    if case.files:
        return case.files[case.path]
    repo = Path(case.repo or "")
    if not repo.is_absolute():
        repo = path.parent / repo
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["git", "-C", str(repo), "show", f"{case.commit}:{case.path}"],  # noqa: S607
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"{where} (case {case.id!r}): git could not run ({exc})") from exc
    if done.returncode != 0:
        raise ConfigError(
            f"{where} (case {case.id!r}): {case.path} at {case.commit} cannot be read from "
            f"the repository {repo}"
        )
    if len(done.stdout) > MAX_FILE_BYTES:
        return done.stdout[:MAX_FILE_BYTES].decode("utf-8", errors="ignore")
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} (case {case.id!r}): {case.path} is not a text file") from exc
