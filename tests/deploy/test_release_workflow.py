"""The release workflow (.github/workflows/release.yml): accepted by actionlint, and doing what
a release needs in order: the tests first, the multi-arch image from the hash-pinned locks,
the chart as an OCI artifact pointing at that image, both signed keyless, SBOMs attested and
attached; and docs/install.md installs what it publishes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
INSTALL = ROOT / "docs" / "install.md"
VALUES = ROOT / "deploy" / "helm" / "vllm-scaler" / "values.yaml"
# actionlint is a Go program (its PyPI wrapper downloads the binary at install time, which a
# machine without access beyond the package registries cannot): built from its Go module.
ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"


def _actionlint() -> str:
    found = shutil.which("actionlint")
    local = ROOT / ".venv" / "bin" / "actionlint"
    if found or local.exists():
        return found or str(local)
    go = shutil.which("go")
    if go is None:
        if os.environ.get("CI"):
            pytest.fail("actionlint is needed and Go is missing to build it")
        pytest.skip("actionlint not installed and no Go toolchain to build it")
    local.parent.mkdir(parents=True, exist_ok=True)
    built = subprocess.run(
        [go, "install", ACTIONLINT],
        env={**os.environ, "GOBIN": str(local.parent), "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return str(local)


def _workflow() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return doc


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [f"{k}: {v}" for k, v in value.items() if not isinstance(v, dict | list)] + [
            s for v in value.values() if isinstance(v, dict | list) for s in _strings(v)
        ]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [str(value)]


def _steps(job: dict[str, Any]) -> str:
    """A job's steps as one text (each key's value as written: uses, with, env, run), to look
    for what they do."""
    return "\n".join(_strings(job["steps"]))


def test_actionlint_accepts_the_workflows() -> None:
    files = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.y*ml"))
    assert str(WORKFLOW) in files
    out = subprocess.run(
        [_actionlint(), "-no-color", *files], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_refuses_a_broken_workflow(tmp_path: Path) -> None:
    """The lint can fail: an unknown needs, a bad expression and an undefined output."""
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    needs: nothing\n"
        "    steps:\n      - run: echo ${{ steps.x.outputs.y }}\n"
    )
    out = subprocess.run(
        [_actionlint(), "-no-color", str(broken)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 1, out.stdout
    assert 'job "a" needs job "nothing" which does not exist' in out.stdout


def _needs(jobs: dict[str, Any], name: str) -> set[str]:
    """Every job ``name`` waits for, directly or not."""
    direct = jobs[name].get("needs", [])
    direct = [direct] if isinstance(direct, str) else direct
    return set(direct).union(*(_needs(jobs, d) for d in direct)) if direct else set()


def test_a_tag_runs_the_tests_before_anything_is_published() -> None:
    wf = _workflow()
    assert list(wf[True]["push"]) == ["tags"]  # PyYAML reads the key `on` as True
    jobs = wf["jobs"]
    assert "bash .ci/run" in _steps(jobs["test"])
    assert "CI: true" in _steps(jobs["test"])
    for name in ("image", "chart", "release"):
        assert "test" in _needs(jobs, name), name
    assert "image" in _needs(jobs, "chart")  # the chart points at an image that exists
    assert wf["permissions"] == {"contents": "read"}


def test_the_image_is_multi_arch_from_the_locks_signed_with_an_sbom() -> None:
    job = _workflow()["jobs"]["image"]
    flavors = job["strategy"]["matrix"]["flavor"]
    assert {(f["suffix"], f["lock"]) for f in flavors} == {
        ("", "requirements.txt"),
        ("-cloud", "requirements-cloud.txt"),
    }
    for flavor in flavors:
        assert (ROOT / flavor["lock"]).exists()
    (build,) = [s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push")]
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["build-args"] == "LOCK=${{ matrix.flavor.lock }}"
    assert build["with"]["push"] is True
    steps = _steps(job)
    assert 'cosign sign --yes "${IMAGE}@${DIGEST}"' in steps
    assert "anchore/sbom-action" in steps and "spdx-json" in steps
    assert "cosign attest --yes --type spdxjson" in steps
    assert job["permissions"]["id-token"] == "write"  # keyless signing
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG LOCK=requirements.txt" in dockerfile and '-r "${LOCK}"' in dockerfile


def test_the_chart_is_pushed_as_oci_pointing_at_the_image_and_signed() -> None:
    wf = _workflow()
    job = wf["jobs"]["chart"]
    steps = _steps(job)
    assert '--version "${VERSION}" --app-version "${VERSION}"' in steps
    assert 'helm push "vllm-scaler-${VERSION}.tgz" "oci://${CHARTS}"' in steps
    assert 'cosign sign --yes "${CHARTS}/vllm-scaler@${DIGEST}"' in steps
    # the rewrite of the image repository matches the chart's default line exactly
    rewrite = re.search(r'sed -i "s\|\^(.*?)\$\|', steps)
    assert rewrite is not None
    assert rewrite.group(1) in VALUES.read_text().splitlines()
    assert yaml.safe_load(VALUES.read_text())["image"]["repository"] in rewrite.group(1)
    release = _steps(wf["jobs"]["release"])
    assert "gh release create" in release and "assets/*" in release


def test_the_names_come_from_the_repository_owner_and_the_docs_install_them() -> None:
    wf = _workflow()
    names = _steps(wf["jobs"]["names"])
    assert "${{ github.repository_owner }}" in names
    assert 'owner="${OWNER,,}"' in names
    assert "image=${REGISTRY}/${owner}/${IMAGE_NAME}" in names
    assert "charts=${REGISTRY}/${owner}/charts" in names
    env = wf["env"]
    image = f"{env['REGISTRY']}/<owner>/{env['IMAGE_NAME']}"
    chart = f"oci://{env['REGISTRY']}/<owner>/charts/vllm-scaler"
    text = INSTALL.read_text(encoding="utf-8")
    assert f"helm install vllm-scaler {chart} --version <version>" in text
    assert f"cosign verify {image}:<version>" in text
    assert f"{image}:<version>-cloud" in text
    assert "github.repository_owner" in text  # the placeholder is said to be the owner
