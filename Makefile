# The README's two commands. Both create (or reuse) .venv with nothing but Python.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test conformance bench clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "agentflow needs Python 3.10 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[postgres]' pytest
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python -m agentflow demo $(ARGS)

conformance: $(STAMP)
	$(VENV)/bin/python -m conformance $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

# Benchmarks compare with other libraries, installed in their own .bench-venv.
BENCH_VENV := .bench-venv
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): setup.cfg pyproject.toml bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[postgres]' -r bench/requirements.txt
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	cd bench && ../$(BENCH_VENV)/bin/python run.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) *.egg-info .pytest_cache
