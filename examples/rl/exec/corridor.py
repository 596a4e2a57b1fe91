"""The corridor of examples/rl/own_env.cc in pure Python, served to distml without Gymnasium:

    distml rl ppo --env "exec:python3 examples/rl/exec/corridor.py" --np 2

A corridor of 10 cells: start in one of the first three, step left (0) or right (1); the right
end pays 1 and ends the episode, every step costs 0.01, and 50 steps cut it short.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import distml_env  # noqa: E402


class Corridor:
    observation_space = distml_env.Box([0.0], [1.0])
    action_space = distml_env.Discrete(2)

    def reset(self, seed=None):
        self.position = (seed or 0) % 3
        self.steps = 0
        return [self.position / 10], {}

    def step(self, action):
        if action not in (0, 1):
            raise ValueError("the action must be 0 (left) or 1 (right), got %r" % action)
        self.position = max(0, self.position + (1 if action == 1 else -1))
        self.steps += 1
        terminated = self.position == 10
        truncated = not terminated and self.steps == 50
        reward = (1.0 if terminated else 0.0) - 0.01
        return [self.position / 10], reward, terminated, truncated, {}


if __name__ == "__main__":
    distml_env.serve(Corridor())
