# The README's two commands. Both create (or reuse) .venv with nothing but Python.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
# The optional extras the tests exercise, comma-separated (setup.cfg extras_require).
TEST_EXTRAS := mcp,postgres,otel-export
# The versions of the OpenTelemetry packages the tests run against (tests/test_tracing*.py).
OTEL_PINS := opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 \
	opentelemetry-exporter-otlp-proto-http==1.45.2
# The reference MCP filesystem server (Node) that tests/test_mcp.py runs, when npm is here.
NODE_TOOLS := .node-tools
NODE_STAMP := $(NODE_TOOLS)/.installed
MCP_FILESYSTEM := @modelcontextprotocol/server-filesystem@2026.8.31
# The browser tests of make test-slow (tests/test_inbox_browser.py) drive Debian's
# chromium (.ci/run installs it) with Playwright; `playwright install` is never run.
PLAYWRIGHT := playwright==1.65.2
PLAYWRIGHT_STAMP := $(VENV)/.playwright-installed

.PHONY: demo test test-slow conformance conformance-peers bench clean

$(STAMP): setup.cfg pyproject.toml Makefile
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "agentflow needs Python 3.10 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[$(TEST_EXTRAS)]' pytest rfc8785==0.1.4 \
		$(OTEL_PINS)
	touch $(STAMP)

# Without npm (or when the install fails) those tests skip, except under CI=true.
$(NODE_STAMP): Makefile
	@if command -v npm >/dev/null 2>&1 && npm install --prefix $(NODE_TOOLS) --no-audit \
	    --no-fund --loglevel=error $(MCP_FILESYSTEM); then touch $@; \
	else echo "note: could not npm install $(MCP_FILESYSTEM); its tests will be skipped"; fi

demo: $(STAMP)
	$(VENV)/bin/python -m agentflow demo $(ARGS)

conformance: $(STAMP)
	$(VENV)/bin/python -m conformance $(ARGS)

# The tests' folders (tmp_path, the stores, the sessions) go to /dev/shm where it is
# a writable tmpfs: an fsync there costs 0.04 ms, not the disk's 10 ms, and the stores
# fsync every write (SPEC R10). make test-slow keeps the disk, as users have it.
TEST_TMPDIR := $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm)

# PYTHONDONTWRITEBYTECODE (set on some machines) would make pytest rewrite the asserts
# of every test module on every run, 2 s of each; the cache goes to git-ignored
# __pycache__ folders.
test: $(STAMP) $(NODE_STAMP)
	$(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) PYTHONDONTWRITEBYTECODE= \
		$(VENV)/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

# What make test leaves out (CI runs both): the tests marked slow (PostgreSQL, a real
# server), and the files that run the command or Python (tests/helpers_cli.py,
# helpers_pty.py, helpers_fork.py) again, each command through the console script in
# its own process, as a user runs it, where make test runs those commands in-process,
# or in a process forked from an interpreter that has agentflow imported already.
CLI_TESTS := $(shell grep -l -e run_agentflow -e run_chat -e pty_chat -e PtyProcess \
	-e helpers_fork tests/test_*.py)

$(PLAYWRIGHT_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet '$(PLAYWRIGHT)'
	touch $@

test-slow: $(STAMP) $(NODE_STAMP) $(PLAYWRIGHT_STAMP)
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -q -m slow $(PYTEST_ARGS)
	PYTHONDONTWRITEBYTECODE= CLI_TESTS_IN_SUBPROCESS=1 $(VENV)/bin/python -m pytest -q \
		-m "not slow" $(CLI_TESTS) $(PYTEST_ARGS)

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

# The peers' adapters (conformance/adapters), in their own .conformance-venv; never run
# by make test. Writes conformance/PEERS.md; `make conformance-peers ARGS=peer_ai_sdk.js` re-runs
# one peer (the others keep the outcomes of their last run, in conformance/.peers/).
PEERS_VENV := .conformance-venv
PEERS_STAMP := $(PEERS_VENV)/.installed

$(PEERS_STAMP): setup.cfg pyproject.toml conformance/adapters/requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -e . -r conformance/adapters/requirements.txt
	touch $(PEERS_STAMP)

# The Node peers (the Vercel AI SDK) at the versions of conformance/adapters/node's
# package.json and package-lock.json.
PEERS_NODE := conformance/adapters/node/node_modules/.installed

$(PEERS_NODE): conformance/adapters/node/package.json conformance/adapters/node/package-lock.json
	cd conformance/adapters/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# A peer whose pins clash with the shared venv's (Strands Agents takes openai 2.x) has
# conformance/adapters/requirements-NAME.txt and a venv of its own, .conformance-venv-NAME,
# built the same way; conformance/peers.py's VENVS names the peers that run in one.
PEERS_OWN := $(patsubst conformance/adapters/requirements-%.txt,$(PEERS_VENV)-%/.installed,\
	$(wildcard conformance/adapters/requirements-*.txt))

$(PEERS_VENV)-%/.installed: setup.cfg pyproject.toml conformance/adapters/requirements-%.txt
	$(PYTHON) -m venv $(PEERS_VENV)-$*
	$(PEERS_VENV)-$*/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)-$*/bin/python -m pip install --quiet -e . -r conformance/adapters/requirements-$*.txt
	touch $@

conformance-peers: $(PEERS_STAMP) $(PEERS_OWN) $(PEERS_NODE)
	$(PEERS_VENV)/bin/python -m conformance.peers $(ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(PEERS_VENV) $(PEERS_VENV)-* $(NODE_TOOLS) conformance/adapters/node/node_modules *.egg-info .pytest_cache
