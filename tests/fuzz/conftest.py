"""The fuzz suite: ``cases.py`` (shared with benchmarks/fuzz.py) is imported from this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
