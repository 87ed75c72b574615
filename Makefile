# The two commands of the README. Both set up everything on a fresh CPU machine.
#   make demo   # venv + install + run the main job on the shipped zoo pair
#   make test   # venv + install + the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROMPT ?= def fibonacci(

.PHONY: setup demo test
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test,triton,tvm,bench]"
	touch $@

demo: setup
	$(BIN)/specir run --prompt "$(PROMPT)" --max-new-tokens 64

test: setup
	TRITON_INTERPRET=1 LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests -n 2 --dist loadfile -q
