"""The container image installs through the same script as `make install`/`make bootstrap` (and so
CI), and `make image` builds with the container engine there is, or says that none is usable.

No container engine runs here: the engines below are stand-ins that answer `info` or not and
record the build they are asked for; what is tested is the choice and the message."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "scripts/install.sh"


def _install_lines(text: str) -> list[str]:
    return [
        line.strip() for line in text.splitlines() if INSTALL in line and not line.lstrip().startswith("#")
    ]


def test_the_image_and_ci_install_through_one_script() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    makefile = (ROOT / "Makefile").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci  # CI runs the Makefile, whose test target depends on bootstrap
    assert re.search(r"^test: bootstrap\b", makefile, re.M)
    docker_steps = " ".join(_install_lines(dockerfile))
    make_steps = " ".join(_install_lines(makefile))
    for step in ("packages", "runtime"):
        assert f"{INSTALL} {step}" in docker_steps
        assert f"{INSTALL} {step}" in make_steps
    # Nothing is installed beside the script: no pip, no Maven, no setup of its own.
    run_lines = [line for line in dockerfile.splitlines() if line.startswith("RUN")]
    assert not any(word in line for line in run_lines for word in ("pip ", "mvn", "kafka-health setup"))
    assert "maven" not in dockerfile.lower().replace("no maven", "")
    compose = (ROOT / "docker-compose.yml").read_text()
    assert compose.count("build: .") == 2  # the compose services are this Dockerfile's image


def test_the_image_runs_as_a_non_root_user_with_a_healthcheck() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    (user,) = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert user.split(":")[0] not in ("0", "root")
    assert "HEALTHCHECK" in dockerfile and "/healthz" in dockerfile


def _bin_with(tmp_path: Path, engines: dict[str, int]) -> Path:
    """A PATH with the tools the script needs and stand-in engines whose `info` exits as given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sed", "head", "timeout", "dirname", "cat"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    for engine, info_status in engines.items():
        script = bin_dir / engine
        script.write_text(
            "#!/bin/bash\n"
            f'if [ "$1" = info ]; then exit {info_status}; fi\n'
            f'echo "$@" > "{tmp_path}/{engine}.called"\n'
        )
        script.chmod(0o755)
    return bin_dir


def _make_image(bin_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    assert make
    return subprocess.run(
        [make, "-s", "image"],
        cwd=ROOT,
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/tmp"), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("engines", "says"),
    [
        ({}, "not installed: docker podman"),
        ({"docker": 1}, "docker is installed but does not answer"),
        ({"docker": 1, "podman": 125}, "podman is installed but does not answer"),
    ],
)
def test_make_image_says_when_no_engine_is_usable(tmp_path: Path, engines: dict[str, int], says: str) -> None:
    done = _make_image(_bin_with(tmp_path, engines))
    assert done.returncode != 0
    assert "make image needs a container engine" in done.stderr
    assert says in done.stderr
    assert "install one" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.called"))


def test_make_image_builds_with_the_engine_that_answers(tmp_path: Path) -> None:
    bin_dir = _bin_with(tmp_path, {"docker": 1, "podman": 0})
    done = _make_image(bin_dir, IMAGE="registry.example/kafka-health:test")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "podman.called").read_text().split() == [
        "build", "--tag", "registry.example/kafka-health:test", "--file", "Dockerfile", ".",
    ]  # fmt: skip
    assert not (tmp_path / "docker.called").exists()
