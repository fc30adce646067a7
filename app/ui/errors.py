"""What a visitor sees when a page fails in a way no page foresaw: one line and an id. The traceback, with
the server's paths in it, goes to the server's log under that id, where the operator can find it; the
visitor's page shows neither it nor Streamlit's offers to search the web for it."""

from __future__ import annotations

import logging
import secrets
from typing import Callable

import streamlit as st
from streamlit import config

logger = logging.getLogger("txviz.app")


def report(error: BaseException) -> str:
    """Log ``error`` with its traceback under a new id and show the visitor one line naming that id."""
    error_id = secrets.token_hex(4)
    logger.error("unexpected error %s on a page", error_id, exc_info=error)
    st.error(f"Something went wrong (id {error_id}). Try again or change the input; the operator can find "
             "the details in the server's log under that id.", icon=":material/error:")
    return error_id


def guarded(run: Callable[[], None]) -> None:
    """Run a page; an unexpected exception is reported (``report``). Under Streamlit's AppTest it stays an
    exception, so a test that checks a page for exceptions still fails on one."""
    try:
        run()
    except Exception as error:  # Streamlit's stop and rerun are BaseExceptions and pass through
        if under_apptest():
            raise
        report(error)


def under_apptest() -> bool:
    """True while Streamlit's AppTest runs the script (it overrides ``streamlit.config.get_option``, which
    ``st.get_option`` does not go through)."""
    return bool(config.get_option("global.appTest"))
