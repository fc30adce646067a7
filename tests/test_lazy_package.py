"""``import txviz`` names its public API lazily (PEP 562): a process that needs only the limits or a
config (a CLI error path, a child process) does not pay torch's import (~2 CPU s here); the names still
resolve, by attribute and by ``from txviz import``."""

import subprocess
import sys


def test_the_limits_and_the_config_import_without_torch():
    code = "import sys, txviz.limits, txviz.config; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]


def test_every_public_name_resolves_and_an_unknown_one_is_an_attribute_error():
    import pytest

    import txviz
    from txviz import Decoder, trace  # the from-import path of __getattr__

    assert Decoder is txviz.Decoder and trace is txviz.trace
    assert all(getattr(txviz, name) is not None for name in txviz.__all__)
    assert set(txviz.__all__) <= set(dir(txviz))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        txviz.nope  # noqa: B018
