# The two commands of the README. Both set up everything on a fresh CPU machine.
#   make demo   # venv + install + run the main job on the shipped zoo pair
#   make test   # venv + install + the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PROMPT ?= def fibonacci(

.PHONY: setup demo test
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements/cpu-constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c requirements/cpu-constraints.txt torch
	$(BIN)/pip install -q -c requirements/cpu-constraints.txt -e ".[test,triton,tvm,bench,serve]"
	touch $@

demo: setup
	$(BIN)/specir run --prompt "$(PROMPT)" --max-new-tokens 64

# One worker a CPU the machine gives this process (2 here), at most 4: each holds models and interpreter state.
test: setup
	TRITON_INTERPRET=1 LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests -n auto --maxprocesses 4 --dist loadfile
