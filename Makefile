# distml front door. Every target runs the idempotent set-up first, then builds incrementally.
BUILD ?= build
NP ?= 2

PREFIX ?= /usr/local

.PHONY: all setup setup-run setup-mnist setup-fuzz build run python test test-kernels bench data format clean install fuzz

all: build

# What make test needs (everything); make run and make install need less (scripts/setup.sh).
setup:
	@bash scripts/setup.sh --for test

setup-run:
	@bash scripts/setup.sh --for run

setup-mnist:
	@bash scripts/setup.sh --for run --mnist

setup-fuzz:
	@bash scripts/setup.sh --for fuzz

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: setup $(BUILD)/build.ninja
	@[ -f $(BUILD)/tests/CTestTestfile.cmake ] || cmake -S . -B $(BUILD)  # configured by make run, before GoogleTest was there
	@ninja -C $(BUILD)

# The main job: LeNet-5 on MNIST with $(NP) ranks for one epoch; prints the test accuracy.
# Builds the distml binary only, not the test suite.
run: setup-mnist $(BUILD)/build.ninja
	@[ -x $(BUILD)/distml ] || echo "make run: building the distml binary (a first build takes about 5 minutes on 2 cores)"
	@ninja -C $(BUILD) distml
	$(BUILD)/distml train --config examples/mnist_lenet.toml --np $(NP)

# The Python module into $(BUILD)/python: PYTHONPATH=$(BUILD)/python /usr/bin/python3 -c "import distml"
python: setup-run $(BUILD)/build.ninja
	@ninja -C $(BUILD) distml_python distml_c10d

# The distml command with what it reads at run time, the headers, libraries and the CMake
# package (find_package(distml); examples/custom_loop).
install: setup-run $(BUILD)/build.ninja
	@ninja -C $(BUILD) distml distml_python distml_c10d
	cmake --install $(BUILD) --prefix $(PREFIX)

# One slot per core: most tests keep one core busy or wait; those that need more say so
# (cmake/test_resources.cmake).
test: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 900 -j $(shell nproc)

# The whole suite under each CPU kernel choice of LibTorch and OpenBLAS (docs/testing.md).
test-kernels: build
	bash scripts/test_kernels.sh $(BUILD)

# Collectives against raw MPI, training speed against PyTorch DDP, accuracy targets, classical
# ML against scikit-learn (speed, and accuracy with every seed), the strategy comparison, the
# user's own models (TorchScript, .npz), the sparse/dense hybrid, the deep RL targets, gradient
# compression (its link part makes network namespaces: root), bf16 against fp32, ZeRO memory
# (its per-rank allowance makes memory cgroups: root) (~2 h).
bench: build data
	@ninja -C $(BUILD) bench_programs
	bash bench/collectives.sh
	bash bench/train_speed.sh
	bash bench/train_accuracy.sh
	bash bench/strategies.sh
	bash bench/user_models.sh
	bash bench/hybrid.sh
	bash bench/pipeline.sh
	bash bench/plan.sh
	bash bench/rl.sh
	bash bench/timeline.sh
	bash bench/precision.sh
	bash bench/zero_memory.sh 2
	bash bench/zero_memory_limit.sh 2560 64
	/usr/bin/python3 bench/ml_speed.py
	/usr/bin/python3 tests/cli/doc_commands.py $(BUILD)/distml . --all
	/usr/bin/python3 tests/ml/sklearn_compare.py $(BUILD)/distml 2,3 --full
	/usr/bin/python3 bench/compress_accuracy.py
	/usr/bin/python3 bench/compress_link.py

# Builds the libFuzzer targets with clang++ into $(BUILD)/fuzz and runs each for FUZZ_SECONDS
# on a copy of its seed corpus; fails on any crash, leak, hang or sanitizer report (docs/operations.md).
FUZZ_SECONDS ?= 60
fuzz: setup-fuzz $(BUILD)/build.ninja
	@ninja -C $(BUILD) distml_comm distml_nn
	bash fuzz/build.sh $(BUILD)/fuzz $(BUILD)
	@fail=0; for t in $$(cat fuzz/targets.txt); do \
	  bash fuzz/run.sh $(BUILD)/fuzz $$t $(FUZZ_SECONDS) || fail=1; done; exit $$fail

data: setup-run
	@bash scripts/setup.sh --for run --data

format:
	find src tests bench scripts cmake -name '*.h' -o -name '*.cc' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
