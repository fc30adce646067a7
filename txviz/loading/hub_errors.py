"""The Hub client's errors, each as one line a reader can act on (a ModelLoadError)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from txviz.loading.errors import ModelLoadError
from txviz.loading.hub_id import HubId


@contextmanager
def one_line(hub_id: HubId) -> Iterator[None]:
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, IncompleteSnapshotError,
                                        LocalEntryNotFoundError, OfflineModeIsEnabled, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    try:
        yield
    except GatedRepoError:
        raise ModelLoadError(f"{hub_id.repo} is gated: accept its terms on the Hub, then set HF_TOKEN") from None
    except RevisionNotFoundError:
        raise ModelLoadError(f"{hub_id.repo} has no revision {hub_id.revision!r}") from None
    except RepositoryNotFoundError:
        raise ModelLoadError(f"{hub_id.repo}: no such model on the Hub (or it is private: set HF_TOKEN)") from None
    except (OfflineModeIsEnabled, LocalEntryNotFoundError, IncompleteSnapshotError) as error:
        raise ModelLoadError(f"{hub_id}: cannot reach the Hub and it is not complete in the cache "
                             f"({type(error).__name__})") from None
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else "no answer"
        raise ModelLoadError(f"{hub_id}: the Hub answered {status}") from None
    except (ConnectionError, TimeoutError) as error:
        raise ModelLoadError(f"{hub_id}: cannot reach the Hub ({type(error).__name__})") from None
    except Exception as error:  # the client's transport errors (httpx2's) are no OSError
        if type(error).__module__.split(".")[0] in {"httpx", "httpx2", "httpcore"}:
            raise ModelLoadError(f"{hub_id}: cannot reach the Hub ({type(error).__name__})") from None
        raise
