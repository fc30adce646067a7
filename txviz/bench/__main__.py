"""A benchmark worker: ``python -m txviz.bench JOB`` runs the job (JSON) and prints its result as JSON."""

import json
import sys

from txviz.bench import _main

sys.exit(_main(json.loads(sys.argv[1])))
