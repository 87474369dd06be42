# The README's two commands. Both create (or reuse) .venv with nothing but Python.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test conformance clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "agentflow needs Python 3.10 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e . pytest
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python -m agentflow demo $(ARGS)

conformance: $(STAMP)
	$(VENV)/bin/python -m conformance $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
