"""Serve a Gymnasium-style environment to distml over stdin/stdout (`--env exec:CMD`).

distml starts CMD once per environment copy and speaks JSON lines with it (the protocol is in
src/distml/rl/envs/exec_env.h and docs/rl.md). With Gymnasium installed:

    import gymnasium as gym
    import distml_env
    distml_env.serve(gym.make("CartPole-v1"))

then `distml rl ppo --env "exec:python3 my_cartpole.py"`. Any object with Gymnasium's
`reset(seed=...) -> (observation, info)`, `step(action) -> (observation, reward, terminated,
truncated, info)`, `observation_space` and `action_space` works; without Gymnasium, describe the
spaces with `Discrete` and `Box` below. Needs only the standard library (NumPy values are
converted if they appear).
"""
import json
import sys


class Discrete:
    """Actions 0..n-1, as gymnasium.spaces.Discrete."""

    def __init__(self, n):
        self.n = n


class Box:
    """Numbers within [low, high] per dimension, as a flat gymnasium.spaces.Box."""

    def __init__(self, low, high):
        self.low, self.high = list(low), list(high)
        self.shape = (len(self.low),)


def _numbers(values):
    """A flat list of floats from a list, tuple, scalar or NumPy array."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        return [float(values)]
    out = []
    for v in values:
        out.extend(_numbers(v))
    return out


def _space(space):
    """The JSON of a space; bounds go along where they are finite (JSON has no infinity)."""
    if hasattr(space, "n"):
        return {"n": int(space.n)}
    described = {"shape": [int(d) for d in space.shape]}
    low, high = _numbers(space.low), _numbers(space.high)
    if all(abs(v) != float("inf") for v in low + high):
        described["low"], described["high"] = low, high
    return described


def _send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def serve(env):
    """Answers distml's requests for `env` until distml closes stdin."""
    discrete = hasattr(env.action_space, "n")
    _send({"distml_env": 1,
           "observation_space": _space(env.observation_space),
           "action_space": _space(env.action_space)})
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if "reset" in request:
                observation, _ = env.reset(seed=request["reset"])
                _send({"observation": _numbers(observation)})
            elif "step" in request:
                action = request["step"]
                action = int(action[0]) if discrete else _as_box_action(action)
                observation, reward, terminated, truncated, _ = env.step(action)
                _send({"observation": _numbers(observation), "reward": float(reward),
                       "terminated": bool(terminated), "truncated": bool(truncated)})
            else:
                _send({"error": "unknown request %s" % line.strip()})
        except Exception as e:  # the message goes to distml, which names the step
            _send({"error": "%s: %s" % (type(e).__name__, e)})


def _as_box_action(action):
    try:
        import numpy  # Gymnasium's Box environments expect arrays
        return numpy.asarray(action, dtype=numpy.float32)
    except ImportError:
        return action
