"""Runs several test scripts one after another in this process, under one `distml launch`:
each pays the launch and torch's import once instead of once a script. A script fails the run
by raising (sys.exit(1) included); the ranks share distml's world (init() returns it again).

usage: run_scripts.py SCRIPT...
"""
import os
import runpy
import sys

for script in sys.argv[1:]:
    runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), script),
                   run_name="__main__")
