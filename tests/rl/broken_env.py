"""An external environment that breaks the protocol on purpose, for the tests of exec: envs.

    python3 broken_env.py MODE STEP
MODE: bad-line (a line that is not JSON), exit (the process exits), error (an {"error": ...}
answer), short (an observation of the wrong size), hang (no answer) -- at step STEP of the first
episode; `hello` breaks the first line instead.
"""
import json
import sys
import time

mode, at = sys.argv[1], int(sys.argv[2])


def send(message):
    sys.stdout.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
    sys.stdout.flush()


if mode == "hello":
    send({"distml_env": 1, "observation_space": {"shape": [1]}})  # no action space
    sys.exit(0)
send({"distml_env": 1, "observation_space": {"shape": [1]}, "action_space": {"n": 2}})
steps = 0
for line in sys.stdin:
    request = json.loads(line)
    if "reset" in request:
        send({"observation": [0.0]})
        continue
    steps += 1
    if steps == at:
        if mode == "bad-line":
            send("observation = 0.5")
        elif mode == "exit":
            sys.exit(3)
        elif mode == "error":
            send({"error": "the simulator blew up"})
        elif mode == "short":
            send({"observation": [], "reward": 0, "terminated": False, "truncated": False})
        elif mode == "hang":
            time.sleep(3600)
        continue
    send({"observation": [0.5], "reward": 1.0, "terminated": False, "truncated": steps % 20 == 0})
