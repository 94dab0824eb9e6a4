"""The release workflow: valid by GitHub's published schema (as the Action's
files are), building deploy/Dockerfile on version tags and pushing to the
registry the Helm chart pulls from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def test_valid_by_githubs_schema() -> None:
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        result = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema",
             "vendor.github-workflows", str(path)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr


def test_it_pushes_the_image_the_chart_pulls_on_tags() -> None:
    wf = yaml.safe_load(RELEASE.read_text())
    assert list(wf[True]) == ["push"] and wf[True]["push"]["tags"]  # tags only
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "debate-bot" / "values.yaml").read_text())
    assert wf["env"]["IMAGE"] == values["image"]["repository"]
    steps = wf["jobs"]["image"]["steps"]
    [build] = [s for s in steps if str(s.get("uses", "")).startswith("docker/build-push-action")]
    assert build["with"]["file"] == "deploy/Dockerfile" and build["with"]["context"] == "."
    assert build["with"]["push"] is True
    assert (ROOT / build["with"]["file"]).is_file()
    assert wf["permissions"]["packages"] == "write"
    # The chart's default tag (appVersion) is the version a tag v<version> pushes.
    [meta] = [s for s in steps if str(s.get("uses", "")).startswith("docker/metadata-action")]
    assert "type=semver,pattern={{version}}" in meta["with"]["tags"]
