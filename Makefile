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

# The main job: the all-reduce benchmark at $(NP) ranks against raw MPI_Allreduce.
run: build
	$(BUILD)/distml bench allreduce --np $(NP) --engine mpi --algo native,ring,hd,tree,auto \
	  --sizes 4,1K,64K,1M,16M,64M

test: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 900

bench: build
	bash bench/collectives.sh

data: setup
	@bash scripts/setup.sh --data

format:
	find src tests bench scripts cmake -name '*.h' -o -name '*.cc' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
