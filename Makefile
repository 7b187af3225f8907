# Vessel: the two commands that matter are `make up` and `make test`.
# Thin by design: every target delegates to scripts/ and CMake.
PRESET ?= release
export PRESET

.PHONY: up test fuzz build bench setup fmt clean help install

# make install [PREFIX=/usr/local] [DESTDIR=/stage]
export PREFIX DESTDIR

help:
	@echo "make up     install what is missing, build, start vesseld on 127.0.0.1:8080"
	@echo "make test   the same setup, then every test through ctest"
	@echo "make build  setup and build without starting anything"
	@echo "make fuzz   every fuzz target under ASan+UBSan, FUZZ_SECONDS (25) each"
	@echo "make install  build, then install under PREFIX (/usr/local), DESTDIR honoured"
	@echo "make bench  run the benchmarks (tables on stdout, JSON in bench/results/)"
	@echo "make fmt    clang-format every C++ file"

setup:
	@scripts/setup.sh

build: setup
	@scripts/build.sh

up: build
	@scripts/up.sh

test: build
	@scripts/test.sh

fuzz: setup
	@scripts/fuzz.sh

bench: build
	@scripts/bench.sh

install: build
	@scripts/install.sh

fmt:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf build
