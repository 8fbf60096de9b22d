# Everything runs inside .venv, which `make venv` builds from nothing but python3.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Servers and tools the tests start (loopback PostgreSQL and Redis, headless Chromium for the UI screenshot).
TEST_DEBS := postgresql redis-server chromium

.PHONY: venv demo test test-debs bench clean

# pyproject.toml declares ranges; constraints.txt is the exact set tested, so every machine installs the same.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[profile,test,reference,fleet]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/tracelake demo

# As root, installs the Debian packages the tests need when any is missing; otherwise those tests skip and say why.
test-debs:
	@missing=$$(for p in $(TEST_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	elif [ -n "$$missing" ]; then echo "not installed (tests that need them skip): $$missing"; fi

test: $(STAMP) test-debs
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) lake demo-traces .pytest_cache build
