import os
import sys

# harness and dist_checks are imported by name, in pytest and in the ranks.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
