# `make run`: set up and run the main job; `make test`: set up and pass the tests.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-slow test-interop test-kafka catalogue bench setup oracle dot clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark,interop]'
	touch $(STAMP)

setup: $(STAMP) dot tests/interop/node_modules/.package-lock.json

# kafkajs for the interop tests (tests/interop/agent.js), pinned by package-lock.json
tests/interop/node_modules/.package-lock.json: tests/interop/package-lock.json
	cd tests/interop && npm ci --no-audit --no-fund --silent

# graphviz's `dot` renders counterexamples as SVG (Debian package graphviz)
dot:
	@command -v dot >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq graphviz >/dev/null; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq graphviz >/dev/null; fi; }

# the real Apache Kafka 4.4.0 (broker, clients, Streams, Connect) and the Java agents, built by Maven
# into ~/.cache/rebalance (rebalance.oracle.maven; Java 17 and Maven needed): the tests' oracle
oracle: $(STAMP)
	$(VENV)/bin/rebalance kafka --build >/dev/null

run: setup
	$(VENV)/bin/rebalance check examples/default.toml

test: setup oracle
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

# real Kafka clients (librdkafka via confluent-kafka, kafka-python, aiokafka, kafkajs, the Java consumer) against `rebalance serve`
test-interop: setup oracle
	$(PY) -m pytest -q -m interop tests examples/app

# the real Kafka 4.4.0 broker (tests marked kafka)
test-kafka: setup oracle
	$(PY) -m pytest -q -m kafka tests

# the whole scenario catalogue and the findings on Kafka 4.4.0 and on serve (tests/catalogue), outside CI: writes the
# side-by-side table (about 25 minutes on two cores)
catalogue: setup oracle
	cd tests && ../$(PY) -m catalogue --out ../results/catalogue --table ../docs/oracle/side-by-side.md
	cd tests && ../$(PY) -m catalogue --findings --out ../results/findings

bench: setup
	$(PY) benchmarks/explore.py
	$(PY) benchmarks/spark_explore.py
	$(PY) benchmarks/assignors.py

clean:
	rm -rf $(VENV) out .pytest_cache
