# `make run`: set up and run the main job; `make test`: set up and pass the tests.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BASE := $(VENV)/.installed-base
DOCS := $(VENV)/.installed-docs
# pytest-xdist's workers: one a core (the suites are CPU-bound; 2 on the CI machine)
JOBS ?= auto
# SUBSET=FILE runs only the tests FILE names, one pytest node id a line (# comments): .ci/run's
# named subsets of the long suites (.ci/slow); without it a suite runs whole. PYTEST_ARGS: more of
# pytest's options (CI's --durations)
ids = $(if $(SUBSET),$(foreach i,$(shell grep -v -e '^\#' -e '^$$' $(SUBSET)),'$(i)'))

.PHONY: run test test-slow test-interop test-kafka catalogue catalogue-kip848 doubles connect streams docs bench setup oracle dot chromium clean

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# the main job's install: the base package alone (no extras, no npm, no Java); a venv made
# before the distribution was renamed kafka-rebalance loses the old name's editable install
$(BASE): pyproject.toml | $(PY)
	$(PY) -m pip uninstall -q -y rebalance 2>/dev/null || true
	$(PY) -m pip install -q -e .
	touch $(BASE)

# everything: every extra ([prove], [spark], [fuzz], [interop]) and the test tools
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip uninstall -q -y rebalance 2>/dev/null || true
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP) $(BASE)

# the documentation site's tools (mkdocs, mkdocs-material, mkdocs-click)
$(DOCS): pyproject.toml | $(STAMP)
	$(PY) -m pip install -q -e '.[test,docs]'
	touch $(DOCS)

setup: $(STAMP) dot tests/interop/node_modules/.package-lock.json

# kafkajs for the interop tests (tests/interop/agent.js), pinned by package-lock.json
tests/interop/node_modules/.package-lock.json: tests/interop/package-lock.json
	cd tests/interop && npm ci --no-audit --no-fund --silent

# $(call debian,PROGRAM,PACKAGE): install Debian's PACKAGE unless PROGRAM is there (as root, else with sudo)
debian = command -v $(1) >/dev/null || { \
  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq $(2) >/dev/null; \
  else sudo apt-get update -qq && sudo apt-get install -y -qq $(2) >/dev/null; fi; }

# graphviz's `dot` renders counterexamples as SVG (Debian package graphviz)
dot:
	@$(call debian,dot,graphviz)

# headless Chromium for `rebalance explore`'s browser test (tests/test_explore.py drives it through Playwright;
# Debian package chromium): `make test` only, `make run` needs no browser
chromium:
	@$(call debian,chromium,chromium)

# the real Apache Kafka 4.4.0 (broker, clients, Streams, Connect) and the Java agents, built by Maven
# into ~/.cache/rebalance (rebalance.oracle.maven; Java 17 and Maven needed): the tests' oracle
oracle: $(STAMP)
	$(VENV)/bin/rebalance kafka --build >/dev/null

run: $(BASE) dot
	$(VENV)/bin/rebalance check examples/default.toml

test: setup oracle chromium
	$(PY) -m pytest -q -n $(JOBS) --dist loadgroup $(PYTEST_ARGS)

test-slow: setup
	$(PY) -m pytest -q -m slow -n $(JOBS) $(PYTEST_ARGS) $(ids)

# real Kafka clients (librdkafka via confluent-kafka, kafka-python, aiokafka, kafkajs, the Java consumer) against `rebalance serve`
test-interop: setup oracle
	$(PY) -m pytest -q -m interop -n $(JOBS) $(PYTEST_ARGS) $(or $(ids),tests examples/app)

# the real Kafka 4.4.0 broker (tests marked kafka)
KAFKA_MARK ?= kafka and not quarantine
test-kafka: setup oracle
	$(PY) -m pytest -q -m "$(KAFKA_MARK)" -n $(JOBS) $(PYTEST_ARGS) $(or $(ids),tests)

# the whole scenario catalogue and the findings on Kafka 4.4.0 and on serve (tests/catalogue), outside CI: writes the
# side-by-side table (about 25 minutes on two cores)
catalogue: setup oracle
	cd tests && ../$(PY) -m catalogue --out ../results/catalogue --table ../docs/oracle/side-by-side.md
	cd tests && ../$(PY) -m catalogue --findings --out ../results/findings

# the catalogue's KIP-848 variants (group.protocol=consumer) on Kafka 4.4.0 and on serve, outside CI: writes their table
catalogue-kip848: setup oracle
	cd tests && ../$(PY) -m catalogue --protocol consumer --out ../results/catalogue-kip848 \
		--table ../docs/oracle/kip848-catalogue.md

# the whole scenario catalogue on the test doubles (franz-go's kfake, built with Go; librdkafka's mock cluster) beside
# serve and Kafka 4.4.0 (tests/doubles, tests/catalogue/fidelity.py), outside CI: writes the fidelity table
# docs/doubles/fidelity.md (docs/doubles.md includes it, with its time)
doubles: setup oracle
	cd tests && ../$(PY) -m catalogue --target kfake --target librdkafka-mock --target serve --target kafka \
	  --out ../results/doubles --fidelity ../docs/doubles/fidelity.md

# Kafka Connect 4.4.0's scenarios on serve and on Kafka (tests/catalogue/connect.py), outside CI: writes the Connect
# table docs/connect/results.md (docs/connect.md includes it, with each scenario's time)
connect: setup oracle
	cd tests && ../$(PY) -m catalogue --connect --out ../results/connect --table ../docs/connect/results.md

# Kafka Streams 4.4.0's scenarios on serve and on Kafka (tests/catalogue/streams.py), outside CI: writes the Streams
# table docs/streams/results.md (docs/streams.md includes it, with each scenario's time)
streams: setup oracle
	cd tests && ../$(PY) -m catalogue --streams --out ../results/streams --table ../docs/streams/results.md

# the site under docs/ (mkdocs.yml; --strict: a broken link or a missing page fails) and the
# tutorials, every shell block of them run (tests/test_docs.py); the site is written to site/
docs: setup $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(PY) -m pytest -q -m docs -n $(JOBS)

bench: setup
	$(PY) benchmarks/explore.py
	$(PY) benchmarks/spark_explore.py
	$(PY) benchmarks/assignors.py

clean:
	rm -rf $(VENV) out site .pytest_cache
