"""Chat templates run in a capped child process: hostile templates (huge powers, huge lists) are refused or
stopped with one clear line, quickly, and a normal template still renders."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from txviz.loading.tokenizer import chat_template
from txviz.loading.tokenizer.chat_template import (CHAT_TEMPLATE_LIMITS, CHAT_TEMPLATE_SECONDS, ChatTemplateError,
                                         render_chat_template)
from txviz.loading.isolated import IsolatedError, Limits, run_worker

CONTEXT = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True,
           "bos_token": "<s>", "eos_token": "</s>"}


@pytest.mark.parametrize("template,reason", [
    ("{{ (7 ** 11529602) > 0 }}", "over 4096 bits"),  # Jinja would fold this while compiling: 13 s in C
    ("{% set n = 99 %}{{ n ** n ** n }}", "over 4096 bits"),  # Jinja reads it as (99 ** 99) ** 99
    ("{{ 2 ** 5000 * 2 ** 5000 }}", "over 4096 bits"),
    ("{{ ([0] * 200000000)|length }}", "sequence of 200,000,000 items"),
    ("{{ 'x' * 1200000000 }}", "sequence of 1,200,000,000 items"),
    ("{{ ('%0999999999d' % 1)|length }}", "more memory"),  # not intercepted: the address-space cap stops it
])
def test_hostile_templates_are_refused_in_well_under_the_deadline(template, reason):
    """Refused for what they are (the reason, not the deadline's message), and well inside the deadline once
    the child's own start is set aside: a plain render just before gives that start (with it, one case took
    2.26 s against the 2 s bound at load 11)."""
    started = time.perf_counter()
    render_chat_template("{{ bos_token }}", CONTEXT)
    start_up = time.perf_counter() - started
    started = time.perf_counter()
    with pytest.raises(ChatTemplateError, match=reason):
        render_chat_template(template, CONTEXT)
    assert time.perf_counter() - started - start_up < CHAT_TEMPLATE_SECONDS


def test_a_long_loop_is_stopped_at_the_deadline_and_the_next_render_works(monkeypatch):
    """The loop runs for hours, so the deadline's value is not under test here: 0.5 s instead of the real
    one (whose child burnt 2 CPU s); the next test holds render_chat_template to CHAT_TEMPLATE_LIMITS."""
    deadline = 0.5
    monkeypatch.setattr(chat_template, "CHAT_TEMPLATE_SECONDS", deadline)
    monkeypatch.setattr(chat_template, "CHAT_TEMPLATE_LIMITS", replace(CHAT_TEMPLATE_LIMITS, seconds=deadline))
    started = time.perf_counter()
    with pytest.raises(ChatTemplateError, match=f"ran for more than {deadline:g} s and was stopped"):
        render_chat_template("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
                             CONTEXT)
    assert deadline <= time.perf_counter() - started < deadline + 3
    rendered = render_chat_template("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}"
                                    "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}", CONTEXT)
    assert rendered == "<s>[user] hi[assistant]"


def test_the_real_deadline_is_what_the_child_gets_and_what_the_message_says(monkeypatch):
    sent = []

    def timed_out(name, request, limits):  # what run_worker raises once the child is past its deadline
        sent.append((name, limits))
        raise IsolatedError("timeout", f"stopped after {limits.seconds:g} s")

    monkeypatch.setattr(chat_template, "run_worker", timed_out)
    with pytest.raises(ChatTemplateError, match=r"^the chat template ran for more than 2 s and was stopped$"):
        render_chat_template("{{ bos_token }}", CONTEXT)
    assert sent == [("chat_template", CHAT_TEMPLATE_LIMITS)] and CHAT_TEMPLATE_LIMITS.seconds == CHAT_TEMPLATE_SECONDS


def test_small_powers_and_products_still_work():
    assert render_chat_template("{{ 2 ** 10 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 3 * 'x' }}", CONTEXT) == \
        "1024 ababab [1, 1] xxx"


def test_inputs_must_be_json():
    with pytest.raises(ChatTemplateError, match="plain JSON"):
        render_chat_template("{{ tool }}", {**CONTEXT, "tool": object()})


def test_the_runner_reports_how_the_child_failed():
    with pytest.raises(ValueError, match="no isolated worker"):
        run_worker("../isolated", {})
    with pytest.raises(ValueError, match="no isolated worker"):
        run_worker("_serve", {})
    with pytest.raises(IsolatedError) as info:
        run_worker("chat_template", {"source": "{% for i in range(99999) %}{% for j in range(99999) %}"
                                               "{% endfor %}{% endfor %}", "context": {}, "max_chars": 10},
                   Limits(seconds=0.5))
    assert info.value.kind == "timeout"
    with pytest.raises(IsolatedError) as info:
        run_worker("chat_template", {"source": "{{ x }}"}, Limits(seconds=5))  # a malformed request
    assert info.value.kind == "refused" and "KeyError" in str(info.value)
