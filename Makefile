# distml front door. Every target runs the idempotent set-up first, then builds incrementally.
BUILD ?= build
NP ?= 2

.PHONY: all setup build run test bench data format clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: setup $(BUILD)/build.ninja
	@ninja -C $(BUILD)

# The main job: LeNet-5 on MNIST with $(NP) ranks for one epoch; prints the test accuracy.
run: build data
	$(BUILD)/distml train --config examples/mnist_lenet.toml --np $(NP)

test: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 900

# Collectives against raw MPI, training speed against PyTorch DDP, accuracy targets, classical
# ML against scikit-learn, the strategy comparison, the deep RL targets (~2 h).
bench: build data
	bash bench/collectives.sh
	bash bench/train_speed.sh
	bash bench/train_accuracy.sh
	bash bench/strategies.sh
	bash bench/rl.sh
	/usr/bin/python3 bench/ml_speed.py

data: setup
	@bash scripts/setup.sh --data

format:
	find src tests bench scripts cmake -name '*.h' -o -name '*.cc' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
