"""Safe loading: only safetensors and GGUF are read, nothing is unpickled; model paths are confined to
the allowed directories (no ``..`` or symlink out of them); chat templates from model files run only in
Jinja's immutable sandbox, in a capped child process (tests/loading/test_isolated_templates.py)."""

from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest
import tokenizers
from tokenizers import models

from txviz.loading.tokenizer import chat_template
from txviz.loading.errors import ModelLoadError
from txviz.loading.sources import confine, discover
from txviz.loading.tokenizer.chat_template import MAX_CHAT_CHARS
from txviz.loading.errors import TokenizerError
from txviz.loading.tokenizer.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
UNPICKLING = re.compile(r"\btorch\.load\b|\bimport (c|cloud)?pickle\b|\bfrom (c|cloud)?pickle\b|\bpickle\.loads?\b"
                        r"|\bjoblib\b|\bdill\b|allow_pickle\s*=\s*True|weights_only\s*=\s*False|\btorch\.jit\.load\b"
                        r"|\bshelve\b|\bmarshal\.loads?\b")


def test_nothing_in_the_package_or_app_can_unpickle():
    offenders = []
    for folder in ("txviz", "app"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                code = line.split("#", 1)[0]
                if UNPICKLING.search(code) and not code.lstrip().startswith(('"', "'")):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


def test_the_grep_would_catch_an_unpickler():
    sample = "state = torch." + "load(path)"  # built, so that repository greps do not take the sample for a use
    assert UNPICKLING.search(sample) and UNPICKLING.search("import pickle")
    assert UNPICKLING.search("np.load(f, allow_pickle=True)") and not UNPICKLING.search("load_file(path)")


# ---- confine: paths typed in the app ----------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    """root/ (allowed) with a model file and a model dir; outside/ (not allowed) with a secret model."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "models" / "hf").mkdir(parents=True)
    (root / "models" / "m.gguf").write_bytes(b"GGUF")
    (root / "models" / "hf" / "config.json").write_text("{}")
    (root / "models" / "hf" / "model.safetensors").write_bytes(b"")
    (outside / "hf").mkdir(parents=True)
    (outside / "secret.gguf").write_bytes(b"GGUF")
    (outside / "hf" / "config.json").write_text("{}")
    (outside / "hf" / "model.safetensors").write_bytes(b"")
    return root.resolve(), outside.resolve()


def test_paths_inside_a_root_resolve(tree):
    root, _ = tree
    assert confine(root / "models" / "m.gguf", [root]) == root / "models" / "m.gguf"
    assert confine(f"{root}/models/hf/../m.gguf", [root]) == root / "models" / "m.gguf"  # .. inside is fine
    assert confine(root / "models" / "hf", [root]) == root / "models" / "hf"


@pytest.mark.parametrize("path", ["{root}/../outside/secret.gguf", "{root}/models/../../outside/hf", "{outside}/secret.gguf",
                                  "/etc/passwd", "/", "{root}/.."])
def test_dot_dot_and_outside_paths_are_refused(tree, path):
    root, outside = tree
    with pytest.raises(ModelLoadError, match="outside the allowed model directories"):
        confine(path.format(root=root, outside=outside), [root])


def test_symlinks_out_of_a_root_are_refused_and_not_listed(tree):
    root, outside = tree
    (root / "models" / "link.gguf").symlink_to(outside / "secret.gguf")  # a file linking out
    (root / "models" / "linked_dir").symlink_to(outside / "hf", target_is_directory=True)  # a directory linking out
    (root / "models" / "inner.gguf").symlink_to(root / "models" / "m.gguf")  # a link inside is fine
    (root / "models" / "loop.gguf").symlink_to(root / "models" / "loop.gguf")  # a loop is skipped, not a crash
    mixed = root / "models" / "mixed"  # a real directory inside whose weights link out
    mixed.mkdir()
    (mixed / "config.json").write_text("{}")
    (mixed / "model.safetensors").symlink_to(outside / "hf" / "model.safetensors")
    for name in ("link.gguf", "linked_dir"):
        with pytest.raises(ModelLoadError, match="outside the allowed model directories"):
            confine(root / "models" / name, [root])
    with pytest.raises(ModelLoadError, match="model.safetensors links outside"):
        confine(mixed, [root])
    assert confine(root / "models" / "inner.gguf", [root]) == root / "models" / "m.gguf"
    listed = {Path(s.path).name for s in discover([root])}
    assert listed == {"m.gguf", "inner.gguf", "hf"}


def test_only_regular_files_are_listed_as_models(tree):
    root, _ = tree
    os.mkfifo(root / "models" / "pipe.gguf")  # opening it would block the listing's reader forever
    fifo_dir = root / "models" / "fifo_hf"
    fifo_dir.mkdir()
    os.mkfifo(fifo_dir / "config.json")
    (fifo_dir / "model.safetensors").write_bytes(b"")
    listed = {Path(s.path).name for s in discover([root])}
    assert "m.gguf" in listed and "pipe.gguf" not in listed and "fifo_hf" not in listed


def test_odd_paths_are_refused_with_a_reason(tree):
    root, _ = tree
    loop = root / "loop"
    loop.symlink_to(loop)
    for path, message in [("", "empty model path"), ("  ", "empty model path"), ("a\x00b", "NUL"),
                          (str(root / "absent.gguf"), "no such file"), (str(loop), "loop|resolve|outside|no such"),
                          (str(root / ("x" * 5000)), "File name too long")]:
        with pytest.raises(ModelLoadError, match=message):
            confine(path, [root])


def test_allowed_roots_come_from_the_environment(tree, monkeypatch):
    root, outside = tree
    monkeypatch.setenv("TXVIZ_HOME", str(root))
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", "")
    with pytest.raises(ModelLoadError, match="TXVIZ_MODEL_DIRS"):
        confine(outside / "secret.gguf")
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", os.pathsep.join(["", str(outside)]))
    assert confine(outside / "secret.gguf") == outside / "secret.gguf"


# ---- chat templates -----------------------------------------------------------------------------------
def templated(template: str) -> Tokenizer:
    return Tokenizer(tokenizers.Tokenizer(models.WordLevel({"a": 0}, unk_token="a")), chat_template=template)


HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("template", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ messages[0].__class__.__mro__ }}",
    "{% set x = messages.append({'role': 'system'}) %}",  # immutable: no changing the caller's data
    "{{ messages[0].update(role='x') }}",
])
def test_malicious_templates_are_refused_by_the_sandbox(template):
    with pytest.raises(TokenizerError, match="SecurityError"):  # the child's exception, by name
        templated(template).apply_chat_template(HI)


@pytest.mark.parametrize("template,message", [
    ("{% for i in range(10**9) %}x{% endfor %}", "Range too big"),  # OverflowError inside the sandbox
    ("{{ 1 / 0 }}", "ZeroDivisionError"),
    ("{{ 'x' * 100000 * 100 }}", "builds a sequence of 10,000,000 items"),  # refused before it is built
    ("{% for i in range(99999) %}{{ 'x' * 999 }}{% endfor %}", f"more than {MAX_CHAT_CHARS:,} characters"),
    ("{% for i in range(99999) %}{% for j in range(9999) %}xxxxxxxx{% endfor %}{% endfor %}", "more than"),
    ("{{ raise_exception('no system role') }}", "no system role"),
])
def test_templates_that_fail_or_explode_give_a_tokenizer_error(template, message):
    with pytest.raises(TokenizerError, match=message):
        templated(template).apply_chat_template(HI)


@pytest.mark.parametrize("template", [
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",  # 10¹⁰ empty steps
    "{% set s = 'ab' * 50000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",  # no call to hook
])
def test_a_template_that_loops_for_hours_is_stopped(template, monkeypatch):
    """Both loops run for hours, so any deadline stops them: a 0.3 s one here (the real one burnt 2 CPU s per
    loop); tests/loading/test_isolated_templates.py holds the real CHAT_TEMPLATE_LIMITS and its message."""
    monkeypatch.setattr(chat_template, "CHAT_TEMPLATE_SECONDS", 0.3)
    monkeypatch.setattr(chat_template, "CHAT_TEMPLATE_LIMITS", replace(chat_template.CHAT_TEMPLATE_LIMITS, seconds=0.3))
    started = time.perf_counter()
    with pytest.raises(TokenizerError, match=r"ran for more than 0.3 s and was stopped"):
        templated(template).apply_chat_template(HI)
    assert time.perf_counter() - started < 10  # stopped, not waited out
    assert templated("{{ messages[0]['content'] }}").apply_chat_template(HI) == HI[0]["content"]  # still works


def test_hidden_attributes_render_as_nothing():
    for template in ("{{ lipsum.__globals__ }}", "{{ raise_exception.__globals__ }}", "{{ self.__init__ }}"):
        assert templated(template).apply_chat_template(HI) == ""


def test_a_chat_template_that_is_not_text_is_refused():
    with pytest.raises(TokenizerError, match="chat template must be text"):
        templated(3)


def test_templates_are_compiled_only_by_the_sandboxed_environment():
    unsandboxed = re.compile(r"\bjinja2\.(Environment|Template)\b|from jinja2 import .*\b(Environment|Template)\b"
                             r"|\bTemplate\(|(?<!Sandboxed)Environment\(")
    offenders = [f"{path.relative_to(ROOT)}:{number}" for folder in ("txviz", "app")
                 for path in sorted((ROOT / folder).rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if unsandboxed.search(line.split("#", 1)[0])]
    assert not offenders, offenders
    worker = (ROOT / "txviz" / "loading" / "workers" / "chat_template.py").read_text()
    assert "class BoundedSandbox(ImmutableSandboxedEnvironment)" in worker
