"""The package works installed from a wheel, away from the checkout.

`pip wheel .` builds the wheel; it is installed (not editable) into a fresh virtualenv under
tmp_path, whose only view of the dependencies is this virtualenv's site-packages (a `.pth` line,
which adds the directory without running its own `.pth` files: the checkout's editable install
stays out). Then, from a working directory outside the checkout, the operator commands check the
shipped rules, routing and an example configuration, and the web and notification templates render
from the installed package.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import sysconfig
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.alert.render import TEMPLATE_NAMES
from tests.fixtures.receivers import sample_notification

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "notifications"
CASE = "group_stopped"
NOT_SOURCE = (".git", ".venv", "var", "build", "*.egg-info", ".*_cache", "__pycache__", "bench", "docs")


class Installed:
    def __init__(self, prefix: Path, workdir: Path) -> None:
        self.python = prefix / "bin" / "python"
        self.cli = prefix / "bin" / "kafka-health"
        self.workdir = workdir

    def run(self, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | (env or {})
        return subprocess.run(
            [str(a) for a in args], cwd=self.workdir, env=environ, capture_output=True, text=True, timeout=120
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    source, dist, prefix, workdir = base / "source", base / "dist", base / "venv", base / "work"
    workdir.mkdir()
    # Built from a copy: setuptools reuses a build/ folder, which would carry modules since deleted.
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "-w", str(dist), "--no-deps", "-q"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("kafka_health-*.whl")
    venv.EnvBuilder(with_pip=False).create(prefix)
    site = next((prefix / "lib").glob("python3.*/site-packages"))
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "install", "-q",
         "--no-deps", "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    yield Installed(prefix, workdir)
    shutil.rmtree(base, ignore_errors=True)


def test_the_package_is_imported_from_the_wheel_not_the_checkout(installed: Installed) -> None:
    where = installed.run(installed.python, "-c", "import monitor; print(monitor.__file__)")
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.python.parents[1]), where.stdout


def test_the_migrations_are_shipped(installed: Installed) -> None:
    script = (
        "from monitor.store.migrate import alembic_config\n"
        "from alembic.script import ScriptDirectory\n"
        "print(ScriptDirectory.from_config(alembic_config()).get_current_head())"
    )
    head = installed.run(installed.python, "-c", script)
    assert head.returncode == 0, head.stderr
    newest = max((ROOT / "migrations" / "versions").glob("[0-9]*.py")).name.split("_")[0]
    assert head.stdout.strip().startswith(newest), (head.stdout, newest)


def test_the_shipped_rules_and_routing_check(installed: Installed) -> None:
    rules = installed.run(installed.cli, "rules", "check")
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "lag.yaml: OK" in rules.stdout and "replication.yaml: OK" in rules.stdout
    routes = installed.run(installed.cli, "routes", "check")
    assert routes.returncode == 0, routes.stdout + routes.stderr
    assert "routing.yaml: OK" in routes.stdout and "owners.yaml: OK" in routes.stdout


def test_the_example_configuration_checks(installed: Installed) -> None:
    example = installed.workdir / "monitor.yaml"
    shutil.copy(ROOT / "monitor.example.yaml", example)
    password = {"KAFKA_HEALTH_CLUSTERS__0__SECURITY__SASL_PASSWORD": "secret"}
    checked = installed.run(installed.cli, "config", "check", example, env=password)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "OK (2 cluster(s)" in checked.stdout
    refused = installed.run(installed.cli, "config", "check", example)
    assert refused.returncode != 0 and "sasl_password" in refused.stdout + refused.stderr


RENDER = """
import json, pickle, sys
from datetime import UTC, datetime
from monitor.alert.render import TEMPLATE_NAMES, Templates
from monitor.expose.web.context import template_environment

notification = pickle.loads(sys.stdin.buffer.read())
templates = Templates(sys.argv[1])
page = template_environment().get_template("web/error.html").render(
    title="Not found", message="no cluster named nowhere", links=[("/", "Overview")],
    inbox_nav=False, generated_at="2026-01-01 00:00:00", now=datetime(2026, 1, 1, tzinfo=UTC),
)
out = {"page": page, **{name: templates.render(name, notification) for name in TEMPLATE_NAMES}}
print(json.dumps(out))
"""


def test_the_web_and_notification_templates_render_from_the_package(installed: Installed) -> None:
    from tests.fixtures.receivers import EXTERNAL_URL

    rendered = subprocess.run(
        [str(installed.python), "-c", RENDER, EXTERNAL_URL],
        input=pickle.dumps(sample_notification(CASE)), capture_output=True, cwd=installed.workdir,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=120, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr.decode()
    out = json.loads(rendered.stdout)
    assert "no cluster named nowhere" in out["page"] and "</html>" in out["page"]
    for name in TEMPLATE_NAMES:
        assert out[name] == (GOLDEN / CASE / name).read_text(encoding="utf-8"), name
