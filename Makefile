# The two commands: `make check` (the main job) and `make test` (the test suite).
# Each runs scripts/setup.sh first, which installs what is missing and is quick after that.
PY := .venv/bin/python
RUNTIME ?= all
VARIANTS ?= seed fast

.PHONY: setup check test smoke lint

setup:
	bash scripts/setup.sh

# Every variant, each judged on every runtime; results in build/check-VARIANT/.
check: setup
	@status=0; for v in $(VARIANTS); do \
	  $(PY) -m py_harness check --runtime $(RUNTIME) --variant $$v || status=1; \
	done; exit $$status

# Two pytest-xdist workers even on a 2-core machine: a serial run leaves a core idle while
# it waits on browsers and pages (docs/scaling.md: 21-34% less wall time, same outcomes).
# The 30 slowest tests are listed at the end and every test's time is in build/junit.xml:
# where a run's time goes, without a second run to find out.
test: setup
	$(PY) -m pytest -n 2 --durations=30 --junitxml=build/junit.xml

smoke: setup
	$(PY) -m pytest -n 2 -m "smoke or not browser"

lint: setup
	$(PY) -m ruff check . && $(PY) -m ruff format --check .
