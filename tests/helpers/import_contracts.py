"""Checking the import contracts of pyproject.toml ([tool.importlinter]) with import-linter's own API.

``check`` runs on the tree this process imports. Run as a script in a copy of txviz/, app/ and
pyproject.toml (the copy first on PYTHONPATH, so grimp finds it), it adds each requested import inside a
function of one file, checks the one contract it must break, puts the file back, and prints the counts of
kept and broken contracts for each, as JSON: one child for every break instead of one per break.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def check(pyproject: Path, contracts: tuple[str, ...] = ()) -> dict:
    """{"kept", "broken", "could_not_run", "broken_names"} of the contracts (all, or those ids)."""
    from importlinter import api  # noqa: F401  (configures import-linter's adapters)
    from importlinter.application import use_cases
    from importlinter.application.use_cases import create_report, read_user_options

    use_cases._register_built_in_contract_types()  # what lint-imports does before its report
    report = create_report(read_user_options(str(pyproject)), limit_to_contracts=contracts, cache_dir=None)
    return {"kept": report.kept_count, "broken": report.broken_count, "could_not_run": report.could_not_run,
            "broken_names": [c.name for c, result in report.get_contracts_and_checks() if not result.kept]}


def check_breaks(root: Path, breaks: list[tuple[str, str, str]]) -> list[dict]:
    """For each (file, import statement, contract id): that contract's counts with the import added."""
    results = []
    for path, statement, contract in breaks:
        source = root / path
        original = source.read_text(encoding="utf-8")
        try:
            source.write_text(original + f"\n\ndef _added_by_the_test():\n    {statement}\n", encoding="utf-8")
            results.append(check(root / "pyproject.toml", (contract,)))
        finally:
            source.write_text(original, encoding="utf-8")
    return results


if __name__ == "__main__":
    print(json.dumps(check_breaks(Path.cwd(), json.loads(sys.argv[1]))))
