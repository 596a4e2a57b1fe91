#!/usr/bin/env python3
"""Runs every ctest test of a build folder alone, one after another, and prints how many cores
each kept busy: (user + system CPU seconds of the test and everything it started) / wall
seconds. What tests/CMakeLists.txt's PROCESSORS labels rest on (docs/testing.md, "Time").

Usage: test_cpu_share.py BUILD_DIR [REGEX]   (prints: cores wall_s cpu_s name)
"""
import json
import os
import re
import resource
import subprocess
import sys
import time


def main():
    build = sys.argv[1]
    pattern = re.compile(sys.argv[2] if len(sys.argv) > 2 else ".")
    listing = json.loads(subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                                        check=True, capture_output=True, text=True).stdout)
    for test in listing["tests"]:
        if not pattern.search(test["name"]):
            continue
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        env = None
        if "ENVIRONMENT" in props:
            env = dict(os.environ)
            env.update(v.split("=", 1) for v in props["ENVIRONMENT"])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        result = subprocess.run(test["command"], cwd=props.get("WORKING_DIRECTORY"), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"{cpu / wall:.2f} {wall:.1f} {cpu:.1f} {test['name']}"
              f"{'' if result.returncode == 0 else f' (exit {result.returncode})'}", flush=True)


if __name__ == "__main__":
    main()
