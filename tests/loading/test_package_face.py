"""txviz.loading's face names load(), LoadedModel and the device functions on first use (PEP 562): a
module of the package (the JSON side-file reader, the isolated-worker runner) imports without torch, and
no module below imports the face (tests/test_import_contracts.py holds that)."""

import subprocess
import sys

import pytest


def test_a_module_of_the_package_imports_without_torch():
    code = ("import sys, txviz.loading.json_files, txviz.loading.isolated, txviz.loading.errors, "
            "txviz.loading.home, txviz.loading.progress; print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]


def test_the_face_names_resolve_to_their_homes():
    import txviz.loading as loading
    from txviz.loading import DEFAULT_MODEL, LoadedModel, default_device, load, resolve_device
    from txviz.loading import device, loaded, loader

    assert (load, DEFAULT_MODEL) == (loader.load, loader.DEFAULT_MODEL) and LoadedModel is loaded.LoadedModel
    assert (default_device, resolve_device) == (device.default_device, device.resolve_device)
    assert set(loading.__all__) <= set(dir(loading))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        loading.nope  # noqa: B018
