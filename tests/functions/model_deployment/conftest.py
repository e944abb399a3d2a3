"""Make this folder's shared fixture module (md_fixtures) importable under importlib mode."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
