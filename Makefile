# Thin front for Meson + Ninja. `make demo` and `make check` also install
# the Debian packages the build needs when they are missing (root only).
BUILD ?= build
SAN_BUILD ?= build-asan
MESON ?= meson

.PHONY: all deps build demo check check-unit check-e2e check-asan install clean bench

all: build

deps:
	@./scripts/deps.sh

$(BUILD)/build.ninja:
	@./scripts/deps.sh
	$(MESON) setup $(BUILD)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	./examples/demo.sh $(BUILD)/ckpt

check: build
	./scripts/check.sh $(BUILD)

check-unit: build
	$(MESON) test -C $(BUILD) --suite unit --print-errorlogs

check-e2e: build
	python3 tests/e2e/runner.py --ckpt $(BUILD)/ckpt --bindir $(BUILD)/tests/e2e

$(SAN_BUILD)/build.ninja:
	@./scripts/deps.sh
	$(MESON) setup $(SAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false

# sanitizer findings abort ckpt, so the test that ran it fails
check-asan: $(SAN_BUILD)/build.ninja
	ninja -C $(SAN_BUILD)
	ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	./scripts/check.sh $(SAN_BUILD)

install: build
	$(MESON) install -C $(BUILD)

bench: build
	./bench/run $(BUILD)/ckpt

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
